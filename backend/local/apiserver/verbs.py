"""The verbs on stored objects: list, get, create, update (and /status, /finalize), patch, delete
one object or a collection. What every write goes through, in kube-apiserver's order: the body
read and checked against the URL (kind, name, namespace), fieldValidation, then the generic
registry (registry/generic.py: the kind's strategy, admission, dryRun, the store). A write returns
once stored; what it sets off is the controllers'. Watches and logs are streams.py's; routing
and errors are server.py's.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from aiohttp import web

from backend.local.apiserver import patch, schemas, tables, validation
from backend.local.apiserver.wire import (
    Replay,
    Target,
    delete_options,
    json_response,
    matcher,
    read_body,
    wants_table,
)
from backend.local.registry.generic import Registry, generated_name
from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError, bad_request, invalid, not_found
from backend.local.registry.store import Store

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class Verbs:
    """ApiServer's verbs (a part of it): they use its generic registry and store."""

    objects: Registry
    store: Store

    def _list(self, request: web.Request, target: Target) -> web.Response:
        items = self.store.list(target.kind, target.namespace, matcher(request, target.kind))
        rv = str(self.store.rv)
        if wants_table(request):
            return json_response(tables.table(target.kind, items, rv, request.query.get("includeObject", "Metadata")))
        return json_response({"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                              "metadata": {"resourceVersion": rv}, "items": items})

    def _respond(self, request: web.Request, kind: Kind, obj: dict[str, Any], code: int = 200,
                 warnings: list[str] | None = None) -> web.Response:
        body = tables.table(kind, [obj], obj["metadata"].get("resourceVersion", ""),
                            request.query.get("includeObject", "Metadata")) if wants_table(request) else obj
        response = json_response(body, code)
        for warning in warnings or []:
            response.headers.add("Warning", f'299 - "{warning}"')
        return response

    def _check_object(self, target: Target, obj: Any) -> dict[str, Any]:
        kind = target.kind
        if not isinstance(obj, dict):
            raise bad_request(f"the request body must be a {kind.kind} object")
        api_version, kind_name = obj.get("apiVersion"), obj.get("kind")
        if (api_version, kind_name) != (kind.api_version, kind.kind):
            raise bad_request(f"the API version in the data ({api_version}) or kind ({kind_name}) does not match "
                              f"the expected {kind.api_version} {kind.kind}")
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise validation_error(kind, "", "metadata", "Required value")
        name = meta.get("name") or target.name
        if not name and meta.get("generateName"):
            name = generated_name(meta["generateName"])
        if not name:
            raise validation_error(kind, "", "metadata.name", "Required value: name or generateName is required")
        if len(name) > 253 or not _NAME.match(name):
            raise validation_error(kind, name, "metadata.name",
                                   f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                                   "case alphanumeric characters, '-' or '.', and must start and end with an "
                                   "alphanumeric character")
        if target.name is not None and name != target.name:
            raise bad_request(f"the name of the object ({name}) does not match the name on the URL ({target.name})")
        meta["name"] = name
        if kind.namespaced:
            namespace = meta.get("namespace") or target.namespace or "default"
            if target.namespace is not None and namespace != target.namespace:
                raise bad_request(f"the namespace of the provided object ({namespace}) does not match the namespace "
                                  f"sent on the request ({target.namespace})")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return obj

    async def _create(self, request: web.Request, target: Target) -> web.Response:
        obj = self._check_object(target, await read_body(request))
        await schemas.ready()
        warnings = validation.check(target.kind, obj, request.query.get("fieldValidation", ""))
        stored, more = self.objects.create(target.kind, obj, dry_run=request.query.get("dryRun") == "All")
        return self._respond(request, target.kind, stored, 201, warnings + more)

    async def _update(self, request: web.Request, target: Target) -> web.Response:
        obj = self._check_object(target, await read_body(request))
        await schemas.ready()
        warnings = validation.check(target.kind, obj, request.query.get("fieldValidation", ""))
        return self._write(request, target, obj, obj["metadata"].get("resourceVersion"), warnings)

    def _write(self, request: web.Request, target: Target, obj: dict[str, Any], expect_rv: str | None,
               warnings: list[str]) -> web.Response:
        stored, more = self.objects.update(target.kind, obj, expect_rv, target.subresource,
                                           dry_run=request.query.get("dryRun") == "All")
        return self._respond(request, target.kind, stored, 200, warnings + more)

    async def _patch(self, request: web.Request, target: Target) -> web.Response:
        content_type = request.content_type
        body = await read_body(request)
        live = self.store.find(target.kind, target.namespace, target.name)
        if live is None:
            if content_type != patch.APPLY:
                raise not_found(target.kind.plural, target.name, target.kind.group)
            return await self._create(Replay(request, body), target)
        if content_type == patch.APPLY:
            self._check_object(target, body)
        warnings = []
        await schemas.ready()
        if content_type in (patch.APPLY, patch.STRATEGIC, patch.MERGE) and isinstance(body, dict):
            warnings = validation.check(target.kind, {**live, **body} if content_type != patch.APPLY else body,
                                        request.query.get("fieldValidation", ""))
        patched = patch.apply_patch(copy.deepcopy(live), content_type, body)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise bad_request("the patch leaves no object")
        patched["metadata"]["name"], patched["apiVersion"], patched["kind"] = (
            target.name, target.kind.api_version, target.kind.kind)
        if target.kind.namespaced:
            patched["metadata"]["namespace"] = live["metadata"]["namespace"]
        expect = patched["metadata"].get("resourceVersion")
        expect = expect if expect != live["metadata"]["resourceVersion"] else None
        return self._write(request, target, patched, expect, warnings)

    async def _delete(self, request: web.Request, target: Target) -> web.Response:
        options = await delete_options(request)
        obj, _gone = self._delete_one(target.kind, target.namespace, target.name, options, request)
        return json_response(obj)

    async def _delete_collection(self, request: web.Request, target: Target) -> web.Response:
        items = self.store.list(target.kind, target.namespace, matcher(request, target.kind))
        options = await delete_options(request)
        deleted = []
        for obj in items:
            try:
                deleted.append(self._delete_one(target.kind, obj["metadata"].get("namespace"),
                                                obj["metadata"]["name"], options, request)[0])
            except ApiError as exc:
                if exc.code != 404:  # gone meanwhile (its owner's deletion took it): nothing to say
                    raise
        return json_response({"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                              "metadata": {"resourceVersion": str(self.store.rv)}, "items": deleted})

    def _delete_one(self, kind: Kind, namespace: str | None, name: str, options: dict[str, Any],
                    request: web.Request) -> tuple[dict[str, Any], bool]:
        """DeleteOptions as the generic registry takes them: gracePeriodSeconds, propagationPolicy
        (or the older orphanDependents), preconditions.uid, dryRun."""
        propagation = options.get("propagationPolicy")
        if propagation is None and options.get("orphanDependents") is not None:
            propagation = "Orphan" if options["orphanDependents"] else "Background"
        return self.objects.delete(kind, namespace, name, options.get("gracePeriodSeconds"), propagation,
                                   (options.get("preconditions") or {}).get("uid"),
                                   dry_run=options.get("dryRun") == ["All"] or request.query.get("dryRun") == "All")


def validation_error(kind: Kind, name: str, field: str, message: str) -> ApiError:
    return invalid(kind.kind, name, [(field, message)], kind.group)
