"""The verbs on stored objects: list, get, create, update (and /status, /finalize), patch, delete
one object or a collection. What every write goes through, in kube-apiserver's order: the query
options (options.py), the body read and checked against the URL (kind, name, namespace),
fieldValidation, then the generic registry (registry/generic.py: the kind's strategy,
admission, metadata, managedFields, dryRun, the store). A write returns once stored; what it
sets off is the controllers'. Lists come in pages (paging.py); watches and logs are
streams.py's; routing and errors are server.py's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from backend.local.apiserver import freshness, options, patch, tables, validation
from backend.local.apiserver.paging import Pager
from backend.local.apiserver.schemas import CoreSchemas
from backend.local.apiserver.wire import (
    Target,
    delete_options,
    json_response,
    matcher,
    DUPLICATES,
    read_body,
    resource_name,
    wants_table,
)
from backend.local.registry.generic import Registry
from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError, bad_request, gone, not_found
from backend.local.registry.store import Store
from backend.local.registry.values import copied

_NAMESPACE_MISMATCH = "the namespace of the provided object does not match the namespace sent on the request"


class Verbs:
    """ApiServer's verbs (a part of it): they use its generic registry, store and pager."""

    objects: Registry
    store: Store
    schemas: CoreSchemas
    pager: Pager
    fresh_timeout: float

    async def _list(self, request: web.Request, target: Target, listing: options.ListOptions) -> web.Response:
        kind = target.kind
        rv = options.check_resource_version(listing.resource_version, resource_name(kind))
        if rv is not None and rv > self.store.rv:
            await freshness.until_fresh(self.store, rv, self.fresh_timeout)
        if listing.match == "Exact" and rv is not None and rv != self.store.rv:
            raise gone("The resourceVersion for the provided list is too old.")
        query = request.query
        page = self.pager.page(kind, target.namespace, matcher(request, kind), listing.limit, listing.continue_token,
                               filtered=bool(query.get("labelSelector") or query.get("fieldSelector")))
        meta: dict[str, Any] = {"resourceVersion": str(page.rv)}
        if page.token:
            meta["continue"] = page.token
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
        if wants_table(request):
            body = tables.table(kind, page.items, str(page.rv), query.get("includeObject", "Metadata"))
            body["metadata"] = meta
            return json_response(body)
        return json_response({"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta,
                              "items": page.items})

    def _respond(self, request: web.Request, kind: Kind, obj: dict[str, Any], code: int = 200,
                 warnings: list[str] | None = None) -> web.Response:
        body = tables.table(kind, [obj], obj["metadata"].get("resourceVersion", ""),
                            request.query.get("includeObject", "Metadata")) if wants_table(request) else obj
        response = json_response(body, code)
        for warning in warnings or []:
            response.headers.add("Warning", warning_header(warning))
        return response

    @staticmethod
    def _check_object(target: Target, obj: Any) -> dict[str, Any]:
        """The body as the object the URL names (rest.EnsureObjectNamespaceMatchesRequestNamespace,
        handlers' checkName); what its metadata must be is the registry's (objectmeta.py)."""
        kind = target.kind
        if not isinstance(obj, dict):
            raise bad_request(f"the request body must be a {kind.kind} object")
        api_version, kind_name = obj.get("apiVersion"), obj.get("kind")
        if (api_version, kind_name) != (kind.api_version, kind.kind):
            raise bad_request(f"the API version in the data ({api_version}) or kind ({kind_name}) does not match "
                              f"the expected {kind.api_version} {kind.kind}")
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request(f"metadata must be an object ({kind.kind} in version \"{kind.version}\" cannot be "
                              "handled)")
        name = meta.get("name")
        if target.name is not None and name != target.name:
            raise bad_request(f"the name of the object ({name or ''}) does not match the name on the URL "
                              f"({target.name})")
        if kind.namespaced:
            namespace = meta.get("namespace") or target.namespace or "default"
            if target.namespace is not None and namespace != target.namespace:
                raise bad_request(_NAMESPACE_MISMATCH)
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return obj

    async def _create(self, request: web.Request, target: Target) -> web.Response:
        asked = options.write_options(request, "CreateOptions")
        obj = self._check_object(target, await read_body(request))
        await self.schemas.ready()
        warnings = validation.check(target.kind, obj, asked.field_validation, self.schemas, request[DUPLICATES])
        validation.drop_unknown(target.kind, obj, warnings, asked.field_validation, self.schemas)
        stored, more = self.objects.create(target.kind, obj, dry_run=asked.dry_run, manager=asked.manager)
        return self._respond(request, target.kind, stored, 201, warnings + more)

    async def _update(self, request: web.Request, target: Target) -> web.Response:
        asked = options.write_options(request, "UpdateOptions")
        obj = self._check_object(target, await read_body(request))
        await self.schemas.ready()
        warnings = validation.check(target.kind, obj, asked.field_validation, self.schemas, request[DUPLICATES])
        validation.drop_unknown(target.kind, obj, warnings, asked.field_validation, self.schemas)
        stored, more = self.objects.update(target.kind, obj, obj["metadata"].get("resourceVersion"),
                                           target.subresource, dry_run=asked.dry_run, manager=asked.manager)
        return self._respond(request, target.kind, stored, 200, warnings + more)

    async def _patch(self, request: web.Request, target: Target) -> web.Response:
        kind, content_type = target.kind, request.content_type
        patch.check_type(kind, content_type)
        asked = options.write_options(request, "PatchOptions", content_type)
        body = await read_body(request)
        await self.schemas.ready()
        if content_type == patch.APPLY:
            return self._apply(request, target, body, asked)
        live = self.store.find(kind, target.namespace, target.name)
        if live is None:
            raise not_found(kind.plural, target.name, kind.group)
        patched = patch.apply_patch(copied(live), content_type, body)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise bad_request("the patch leaves no object")
        warnings = validation.check(kind, patched, asked.field_validation, self.schemas)
        validation.drop_unknown(kind, patched, warnings, asked.field_validation, self.schemas)
        meta = patched["metadata"]
        if meta.get("name") != target.name:
            raise bad_request(f"the name of the object ({meta.get('name') or ''}) does not match the name on the URL "
                              f"({target.name})")
        if kind.namespaced and meta.get("namespace", live["metadata"]["namespace"]) != target.namespace:
            raise bad_request(_NAMESPACE_MISMATCH)
        patched["apiVersion"], patched["kind"] = kind.api_version, kind.kind
        if kind.namespaced:
            meta["namespace"] = target.namespace
        expect = meta.get("resourceVersion")
        if expect is not None and not isinstance(expect, str):
            raise bad_request("metadata.resourceVersion must be a string")
        stored, more = self.objects.update(kind, patched, expect, target.subresource, dry_run=asked.dry_run,
                                           manager=asked.manager, uid_precondition=False)
        return self._respond(request, kind, stored, 200, warnings + more)

    def _apply(self, request: web.Request, target: Target, config: Any, asked: options.WriteOptions) -> web.Response:
        """Server-side apply (patch type application/apply-patch+yaml): the registry's `apply`."""
        kind = target.kind
        if not isinstance(config, dict):
            raise bad_request(f"error decoding YAML: the applied configuration must be a {kind.kind} object")
        if not isinstance(config.get("metadata", {}), dict):
            raise bad_request("error decoding YAML: metadata must be an object")
        meta = config.get("metadata") or {}
        if kind.namespaced and meta.get("namespace") not in (None, "", target.namespace):
            raise bad_request(_NAMESPACE_MISMATCH)
        warnings = validation.check(kind, config, asked.field_validation, self.schemas, request[DUPLICATES])
        validation.drop_unknown(kind, config, warnings, asked.field_validation, self.schemas)
        obj, more, created = self.objects.apply(kind, target.namespace, target.name or "", config, asked.manager,
                                                asked.force, target.subresource, asked.dry_run)
        return self._respond(request, kind, obj, 201 if created else 200, warnings + more)

    async def _delete(self, request: web.Request, target: Target) -> web.Response:
        asked = options.delete_options(await delete_options(request))
        obj, _gone = self._delete_one(target.kind, target.namespace, target.name, asked)
        return json_response(obj)

    async def _delete_collection(self, request: web.Request, target: Target) -> web.Response:
        items = self.store.list(target.kind, target.namespace, matcher(request, target.kind))
        asked = options.delete_options(await delete_options(request))
        deleted = []
        for obj in items:
            try:
                deleted.append(self._delete_one(target.kind, obj["metadata"].get("namespace"),
                                                obj["metadata"]["name"], asked)[0])
            except ApiError as exc:
                if exc.code != 404:  # gone meanwhile (its owner's deletion took it): nothing to say
                    raise
        return json_response({"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                              "metadata": {"resourceVersion": str(self.store.rv)}, "items": deleted})

    def _delete_one(self, kind: Kind, namespace: str | None, name: str,
                    asked: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """DeleteOptions as the generic registry takes them: gracePeriodSeconds, propagationPolicy
        (or the older orphanDependents), preconditions.uid, dryRun."""
        propagation = asked.get("propagationPolicy")
        if propagation is None and asked.get("orphanDependents") is not None:
            propagation = "Orphan" if asked["orphanDependents"] else "Background"
        return self.objects.delete(kind, namespace, name, asked.get("gracePeriodSeconds"), propagation,
                                   (asked.get("preconditions") or {}).get("uid"), dry_run=bool(asked.get("dryRun")))


def warning_header(text: str) -> str:
    """A Warning header as apimachinery's net.NewWarningHeader writes it: code 299, agent "-",
    the text a quoted-string (`"` and `\\` escaped; kubectl drops a header that is not one)."""
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{quoted}"'
