"""The HTTP side of the API server: routing, authentication, verbs, watch and log streams.

Paths and verbs are those of kube-apiserver:

    /api/v1/[namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]
    /apis/GROUP/VERSION/[namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]

GET lists (or watches, with ?watch=1) a collection and gets an object, POST creates, PUT
replaces, PATCH patches, DELETE deletes one object or a collection. Every request carries the
kubeconfig's bearer token (else 401). What an object means once stored is the controller's,
through `Hooks`; anything not served is refused with a Status that names it.
"""

from __future__ import annotations

import asyncio
import copy
import hmac
import json
import logging
import re
import time
from typing import Any, AsyncIterator

import yaml
from aiohttp import web

from backend.local.apiserver import discovery, openapi, patch, protobuf, schemas, tables, validation
from backend.local.apiserver.kinds import Kind, Registry
from backend.local.apiserver.selectors import field_matcher, label_matcher
from backend.local.apiserver.status import (
    ApiError,
    bad_request,
    not_found,
    refused,
    too_large,
    unauthorized,
    unsupported_media,
)
from backend.local.apiserver.store import Store

log = logging.getLogger("kfcockpit.apiserver")

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's request size limit
BOOKMARK_SECONDS = 5.0
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_UNSERVED_SUBRESOURCES = ("exec", "attach", "portforward", "proxy", "eviction", "binding", "ephemeralcontainers",
                          "resize", "scale")


class Hooks:
    """What the controllers add to the generic behaviour; the defaults store and nothing more."""

    def admit(self, kind: Kind, operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
        """Default and validate `obj` in place (raise ApiError to deny); returns warnings."""
        return []

    async def written(self, kind: Kind, operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """After a create or update was stored: start what it declares."""

    async def deleting(self, kind: Kind, obj: dict[str, Any], grace: int | None) -> dict[str, Any] | None:
        """Before an object is deleted. Return the object to keep it (graceful deletion under
        way: the hook deletes it later), None to delete it now."""
        return None

    def computed(self, kind: Kind, namespace: str | None) -> list[dict[str, Any]] | None:
        """Objects of a kind nobody stores (metrics), or None."""
        return None

    async def pod_log(self, namespace: str, name: str, options: dict[str, str]) -> AsyncIterator[bytes]:
        raise refused("pods/log is not served")
        yield b""  # pragma: no cover

    def streams_changed(self, open_streams: int) -> None:
        """A watch or log stream opened or closed: someone is (or no longer is) looking."""


class Request:
    """A parsed resource request."""

    def __init__(self, kind: Kind, namespace: str | None, name: str | None, subresource: str | None):
        self.kind, self.namespace, self.name, self.subresource = kind, namespace, name, subresource


class ApiServer:
    def __init__(self, registry: Registry, store: Store, hooks: Hooks, token: str):
        self.registry, self.store, self.hooks, self.token = registry, store, hooks, token
        self.open_streams = 0  # watches and log follows being served
        self.app = web.Application(client_max_size=MAX_BODY, middlewares=[self._errors, self._authenticate])
        self.app.router.add_route("*", "/{tail:.*}", self._route)

    # ------------------------------------------------------------------ middleware

    @web.middleware
    async def _errors(self, request: web.Request, handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return _json(exc.status(), exc.code)
        except web.HTTPRequestEntityTooLarge:
            return _json(too_large(MAX_BODY).status(), 413)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug: answered as upstream does (500 InternalError), logged whole
            log.exception("%s %s failed", request.method, request.path)
            return _json(ApiError(500, "InternalError", f"Internal error occurred: {type(exc).__name__}: {exc}")
                         .status(), 500)

    @web.middleware
    async def _authenticate(self, request: web.Request, handler) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise unauthorized()
        return await handler(request)

    # ------------------------------------------------------------------ routing

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if request.method == "GET":
            found = await self._discovery(request, parts)
            if found is not None:
                return found
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        target = self._resource(group, version, rest)
        return await self._serve(request, target)

    async def _discovery(self, request: web.Request, parts: list[str]) -> web.StreamResponse | None:
        accept = request.headers.get("Accept", "")
        if parts in (["api"], ["apis"]):
            if "as=APIGroupDiscoveryList" in accept and "v=v2;" in accept.replace("v=v2beta1", ""):
                return _json(discovery.aggregated(self.registry, core=parts == ["api"]),
                             content_type=discovery.AGGREGATED)
            return _json(discovery.core_versions() if parts == ["api"] else discovery.group_list(self.registry))
        if parts == ["version"]:
            return _json(discovery.VERSION)
        if parts in (["healthz"], ["livez"], ["readyz"]):
            return web.Response(text="ok")
        if parts and parts[0] == "openapi":
            if len(parts) > 2:
                await schemas.ready()
            doc = openapi.document(self.registry, parts[1:])
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return _json(doc)
        if len(parts) == 2 and parts[0] == "api":
            return self._or_404(discovery.resource_list(self.registry, "", parts[1]))
        if len(parts) == 2 and parts[0] == "apis":
            return self._or_404(discovery.group(self.registry, parts[1]))
        if len(parts) == 3 and parts[0] == "apis":
            return self._or_404(discovery.resource_list(self.registry, parts[1], parts[2]))
        return None

    @staticmethod
    def _or_404(doc: dict[str, Any] | None) -> web.Response:
        if doc is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return _json(doc)

    def _resource(self, group: str, version: str, rest: list[str]) -> Request:
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        kind = self.registry.by_path(group, version, rest[0])
        if kind is None:
            gv = f"{group}/{version}" if group else version
            raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                                            f"({rest[0]} in {gv} is not served by the embedded cluster)")
        if namespace is not None and not kind.namespaced:
            raise ApiError(404, "NotFound", f"{kind.plural} are cluster-scoped: not under a namespace")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in kind.subresources:
            verb = "is not implemented" if sub in _UNSERVED_SUBRESOURCES else "does not exist"
            raise refused(f"{kind.plural}/{sub} {verb} on the embedded cluster (pods are processes on this machine: "
                          "run commands there directly)" if sub in _UNSERVED_SUBRESOURCES else
                          f"the subresource {kind.plural}/{sub} {verb}")
        return Request(kind, namespace, name, sub)

    def _require_namespace(self, namespace: str) -> None:
        ns_kind = self.registry.by_kind("v1", "Namespace")
        if self.store.find(ns_kind, None, namespace) is None:
            raise not_found("namespaces", namespace)

    # ------------------------------------------------------------------ verbs

    async def _serve(self, request: web.Request, target: Request) -> web.StreamResponse:
        method, query = request.method, request.query
        if target.kind.group == "metrics.k8s.io":
            if method != "GET" or flag(query.get("watch")):
                raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {target.kind.plural}."
                                                        "metrics.k8s.io (get and list only)")
            return self._metrics(request, target)
        if target.subresource == "log":
            return await self._log(request, target)
        if method == "GET":
            if target.name is None:
                if flag(query.get("watch")):
                    return await self._watch(request, target)
                return self._list(request, target)
            return self._respond(request, target.kind, self.store.get(target.kind, target.namespace, target.name))
        if method == "POST" and target.name is None:
            return await self._create(request, target)
        if method == "PUT" and target.name is not None:
            return await self._update(request, target)
        if method == "PATCH" and target.name is not None:
            return await self._patch(request, target)
        if method == "DELETE":
            if target.name is None:
                return await self._delete_collection(request, target)
            return await self._delete(request, target)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on this path")

    def _matcher(self, request: web.Request, kind: Kind):
        labels = label_matcher(request.query.get("labelSelector"))
        fields = field_matcher(request.query.get("fieldSelector"), kind.kind)
        return lambda obj: labels(obj) and fields(obj)

    def _list(self, request: web.Request, target: Request) -> web.Response:
        items = self.store.list(target.kind, target.namespace, self._matcher(request, target.kind))
        rv = str(self.store.rv)
        if _wants_table(request):
            return _json(tables.table(target.kind, items, rv, request.query.get("includeObject", "Metadata")))
        return _json({"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                      "metadata": {"resourceVersion": rv}, "items": items})

    def _respond(self, request: web.Request, kind: Kind, obj: dict[str, Any], code: int = 200,
                 warnings: list[str] | None = None) -> web.Response:
        body = tables.table(kind, [obj], obj["metadata"].get("resourceVersion", ""),
                            request.query.get("includeObject", "Metadata")) if _wants_table(request) else obj
        response = _json(body, code)
        for warning in warnings or []:
            response.headers.add("Warning", f'299 - "{warning}"')
        return response

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if len(raw) > MAX_BODY:
            raise too_large(MAX_BODY)
        content_type = request.content_type
        if content_type == protobuf.CONTENT_TYPE:
            return protobuf.decode(raw)
        if content_type not in ("application/json", "application/yaml", "", *patch.TYPES):
            raise unsupported_media(content_type, ["application/json", "application/yaml", *patch.TYPES])
        try:
            if content_type in ("application/yaml", patch.APPLY):
                return yaml.safe_load(raw.decode())
            return json.loads(raw or b"null")
        except (ValueError, yaml.YAMLError, UnicodeDecodeError) as exc:
            raise bad_request(f"the request body is not valid {'YAML' if 'yaml' in content_type else 'JSON'}: "
                              f"{str(exc).splitlines()[0]}") from None

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
        obj = self._check_object(target, await self._body(request))
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
        obj = self._check_object(target, await self._body(request))
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
        body = await self._body(request)
        live = self.store.find(target.kind, target.namespace, target.name)
        if live is None:
            if content_type != patch.APPLY:
                raise not_found(target.kind.plural, target.name, target.kind.group)
            return await self._create(_Replay(request, body), target)
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
        options = await self._delete_options(request)
        if options.get("dryRun") == ["All"] or request.query.get("dryRun") == "All":
            return _json(obj)
        kept = await self.hooks.deleting(target.kind, obj, options.get("gracePeriodSeconds"))
        if kept is not None:
            return _json(kept, 202)
        gone = self.delete_cascade(target.kind, obj)
        return _json(gone)

    async def _delete_collection(self, request: web.Request, target: Request) -> web.Response:
        items = self.store.list(target.kind, target.namespace, self._matcher(request, target.kind))
        options = await self._delete_options(request)
        deleted = []
        for obj in items:
            if await self.hooks.deleting(target.kind, obj, options.get("gracePeriodSeconds")) is None:
                deleted.append(self.delete_cascade(target.kind, obj))
        return _json({"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                      "metadata": {"resourceVersion": str(self.store.rv)}, "items": deleted})

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        options: dict[str, Any] = {}
        if raw.strip():
            try:
                options = json.loads(raw)
            except ValueError:
                raise bad_request("DeleteOptions: the body is not valid JSON") from None
        if "gracePeriodSeconds" in request.query:
            try:
                options["gracePeriodSeconds"] = int(request.query["gracePeriodSeconds"])
            except ValueError:
                raise bad_request("gracePeriodSeconds must be an integer") from None
        return options

    def delete_cascade(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        """Delete an object and, as the garbage collector does, everything it owns."""
        meta = obj["metadata"]
        gone = self.store.delete(kind, meta.get("namespace"), meta["name"])
        for kind_key, dependent in self.store.dependents(meta.get("uid", "")):
            other, owned = self.registry.by_key(kind_key), dependent["metadata"]
            if self.store.find(other, owned.get("namespace"), owned["name"]) is not None:  # not gone meanwhile
                self.delete_cascade(other, dependent)
        return gone

    # ------------------------------------------------------------------ streams

    async def _watch(self, request: web.Request, target: Request) -> web.StreamResponse:
        query = request.query
        match = self._matcher(request, target.kind)
        since = query.get("resourceVersion")
        initial = flag(query.get("sendInitialEvents"))
        watch, backlog = self.store.watch(target.kind, target.namespace, match, "0" if initial else since)
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = flag(query.get("allowWatchBookmarks"))
        as_table = _wants_table(request)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        first_table = True

        def encode(event_type: str, obj: dict[str, Any]) -> bytes:
            nonlocal first_table
            if as_table and event_type != "BOOKMARK":
                obj = tables.table(target.kind, [obj], obj["metadata"].get("resourceVersion", ""),
                                   query.get("includeObject", "Metadata"), headers=first_table)
                first_table = False
            return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"

        def bookmark(extra: dict[str, str] | None = None) -> bytes:
            meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
            if extra:
                meta["annotations"] = extra
            return encode("BOOKMARK", {"kind": target.kind.kind, "apiVersion": target.kind.api_version,
                                       "metadata": meta})

        deadline = time.monotonic() + timeout
        self._stream(+1)
        try:
            chunk = b"".join(encode(e.type, e.object) for e in backlog)
            if initial:
                chunk += bookmark({"k8s.io/initial-events-end": "true"})
            if chunk:
                await response.write(chunk)
            while not watch.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    event = await asyncio.wait_for(watch.queue.get(), min(left, BOOKMARK_SECONDS))
                except asyncio.TimeoutError:
                    if bookmarks:
                        await response.write(bookmark())
                    continue
                if event is None:
                    break
                events = [event]
                while not watch.queue.empty() and len(events) < 1000:
                    queued = watch.queue.get_nowait()
                    if queued is None:
                        watch.closed = True
                        break
                    events.append(queued)
                await response.write(b"".join(encode(e.type, e.object) for e in events))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(watch)
            self._stream(-1)
        return response

    async def _log(self, request: web.Request, target: Request) -> web.StreamResponse:
        if request.method != "GET" or target.name is None:
            raise ApiError(405, "MethodNotAllowed", "pods/log supports GET only")
        self.store.get(target.kind, target.namespace, target.name)
        options = dict(request.query)
        lines = self.hooks.pod_log(target.namespace or "default", target.name, options)
        first = await anext(lines, None)  # errors (unknown container, no previous) before any byte is sent
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        self._stream(+1)
        try:
            if first:
                await response.write(first)
            async for chunk in lines:
                await response.write(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            await lines.aclose()
            self._stream(-1)
        return response

    def _stream(self, change: int) -> None:
        self.open_streams += change
        self.hooks.streams_changed(self.open_streams)

    def _metrics(self, request: web.Request, target: Request) -> web.Response:
        items = self.hooks.computed(target.kind, target.namespace) or []
        match = self._matcher(request, target.kind)
        items = [i for i in items if match(i)]
        if target.name is not None:
            found = [i for i in items if i["metadata"]["name"] == target.name]
            if not found:
                raise not_found(target.kind.plural, target.name, target.kind.group)
            return _json(found[0])
        return _json({"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                      "metadata": {}, "items": items})


class _Replay:
    """A request whose body was already read (server-side apply creating the object)."""

    def __init__(self, request: web.Request, body: Any):
        self._request, self._body = request, body
        self.query, self.headers, self.content_type = request.query, request.headers, "application/json"

    async def read(self) -> bytes:
        return json.dumps(self._body).encode()


def flag(value: str | None) -> bool:
    """A boolean query parameter as Go's strconv.ParseBool reads it ("true", "True", "1", "t"...)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def validation_error(kind: Kind, name: str, field: str, message: str) -> ApiError:
    from backend.local.apiserver.status import invalid

    return invalid(kind.kind, name, [(field, message)], kind.group)


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    first = accept.split(",")[0]
    return "as=Table" in first


def _json(body: Any, code: int = 200, content_type: str = "application/json") -> web.Response:
    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=code,
                        headers={"Content-Type": content_type})
