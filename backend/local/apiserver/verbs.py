"""The verbs on stored objects: list, get, create, update (and /status), patch, delete one
object or a collection, with the garbage collector's cascade. What every write goes through, in
kube-apiserver's order: the body read and checked against the URL (kind, name, namespace),
fieldValidation, admission (`Hooks.admit`), dryRun, the store, then `Hooks.written`.
Watches and logs are streams.py's; routing and errors are server.py's.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

from aiohttp import web

from backend.local.apiserver import patch, schemas, tables, validation
from backend.local.registry.kinds import Kind, Kinds
from backend.local.registry.status import ApiError, bad_request, invalid, not_found
from backend.local.registry.store import Store
from backend.local.apiserver.wire import (
    Replay,
    delete_options,
    json_response,
    matcher,
    read_body,
    wants_table,
)

if TYPE_CHECKING:
    from backend.local.apiserver.server import Hooks, Request

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class Verbs:
    """ApiServer's verbs (a part of it): they use its registry, store and hooks."""

    registry: Kinds
    store: Store
    hooks: Hooks

    def _require_namespace(self, namespace: str) -> None:
        ns_kind = self.registry.by_kind("v1", "Namespace")
        if self.store.find(ns_kind, None, namespace) is None:
            raise not_found("namespaces", namespace)

    def _list(self, request: web.Request, target: Request) -> web.Response:
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

    def _check_object(self, target: Request, obj: Any) -> dict[str, Any]:
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
            import secrets
            name = meta["generateName"] + secrets.token_hex(3)[:5]
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

    async def _create(self, request: web.Request, target: Request) -> web.Response:
        obj = self._check_object(target, await read_body(request))
        if target.kind.namespaced:  # listing in a missing namespace is empty; creating there is NotFound
            self._require_namespace(obj["metadata"]["namespace"])
        for managed in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            obj["metadata"].pop(managed, None)
        await schemas.ready()
        warnings = validation.check(target.kind, obj, request.query.get("fieldValidation", ""))
        warnings += self.hooks.admit(target.kind, "CREATE", obj, None)
        if request.query.get("dryRun") == "All":
            return self._respond(request, target.kind, obj, 201, warnings)
        stored = self.store.create(target.kind, obj)
        await self.hooks.written(target.kind, "CREATE", stored, None)
        return self._respond(request, target.kind, self.store.find(target.kind, target.namespace or
                                                                    stored["metadata"].get("namespace"),
                                                                    stored["metadata"]["name"]) or stored,
                             201, warnings)

    async def _update(self, request: web.Request, target: Request) -> web.Response:
        obj = self._check_object(target, await read_body(request))
        old = self.store.get(target.kind, obj["metadata"].get("namespace"), target.name)
        await schemas.ready()
        warnings = validation.check(target.kind, obj, request.query.get("fieldValidation", ""))
        return await self._write(request, target, old, obj, obj["metadata"].get("resourceVersion"), warnings)

    async def _write(self, request: web.Request, target: Request, old: dict[str, Any], obj: dict[str, Any],
                     expect_rv: str | None, warnings: list[str]) -> web.Response:
        if target.subresource == "status":  # only status changes through /status
            obj = {**copy.deepcopy(old), "status": obj.get("status")}
        elif "status" in target.kind.subresources and "status" in old:
            obj["status"] = old["status"]  # and never through the main resource
        warnings += self.hooks.admit(target.kind, "UPDATE", obj, old)
        if request.query.get("dryRun") == "All":
            return self._respond(request, target.kind, obj, 200, warnings)
        stored = self.store.update(target.kind, obj, expect_rv)
        if stored is not old:
            await self.hooks.written(target.kind, "UPDATE", stored, old)
        return self._respond(request, target.kind, stored, 200, warnings)

    async def _patch(self, request: web.Request, target: Request) -> web.Response:
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
        return await self._write(request, target, live, patched, expect, warnings)

    async def _delete(self, request: web.Request, target: Request) -> web.Response:
        obj = self.store.get(target.kind, target.namespace, target.name)
        options = await delete_options(request)
        if options.get("dryRun") == ["All"] or request.query.get("dryRun") == "All":
            return json_response(obj)
        kept = await self.hooks.deleting(target.kind, obj, options.get("gracePeriodSeconds"))
        if kept is not None:
            return json_response(kept, 202)
        gone = self.delete_cascade(target.kind, obj)
        return json_response(gone)

    async def _delete_collection(self, request: web.Request, target: Request) -> web.Response:
        items = self.store.list(target.kind, target.namespace, matcher(request, target.kind))
        options = await delete_options(request)
        deleted = []
        for obj in items:
            if await self.hooks.deleting(target.kind, obj, options.get("gracePeriodSeconds")) is None:
                deleted.append(self.delete_cascade(target.kind, obj))
        return json_response({"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                              "metadata": {"resourceVersion": str(self.store.rv)}, "items": deleted})

    def delete_cascade(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        """Delete an object and, as the garbage collector does, everything it owns."""
        meta = obj["metadata"]
        gone = self.store.delete(kind, meta.get("namespace"), meta["name"])
        for kind_key, dependent in self.store.dependents(meta.get("uid", "")):
            other, owned = self.registry.by_key(kind_key), dependent["metadata"]
            if self.store.find(other, owned.get("namespace"), owned["name"]) is not None:  # not gone meanwhile
                self.delete_cascade(other, dependent)
        return gone


def validation_error(kind: Kind, name: str, field: str, message: str) -> ApiError:
    return invalid(kind.kind, name, [(field, message)], kind.group)
