"""The HTTP side of the API server: authentication, errors as Status, routing, discovery.

Paths and verbs are those of kube-apiserver:

    /api/v1/[namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]
    /apis/GROUP/VERSION/[namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]

GET lists (or watches, with ?watch=1) a collection and gets an object, POST creates, PUT
replaces, PATCH patches, DELETE deletes one object or a collection. Every request carries the
kubeconfig's bearer token (else 401). What an object means once stored is the controllers';
anything not served is refused with a Status that names it. The verbs are
verbs.py's (every write through the generic registry, registry/generic.py), watches and log
follows streams.py's, bodies and answers on the wire wire.py's; faults.py what a test breaks in
the streams (never reachable from the network).
"""

from __future__ import annotations

import hmac
import logging
from typing import Any, Callable

from aiohttp import web

from backend.local.apiserver.answers import http_refusal, status_errors
from backend.local.apiserver import discovery, eviction, freshness, openapi, options
from backend.local.apiserver.faults import Faults
from backend.local.apiserver.paging import Pager
from backend.local.apiserver.schemas import CoreSchemas
from backend.local.registry.generic import Registry
from backend.local.registry.status import (
    ApiError,
    not_found,
    refused,
    too_large,
    unauthorized,
)
from backend.local.apiserver.streams import Nodes, Streams
from backend.local.apiserver.verbs import Verbs
from backend.local.apiserver.wire import MAX_BODY, Target, json_response, matcher, parse_bool

log = logging.getLogger("kfcockpit.apiserver")

_UNSERVED_SUBRESOURCES = ("exec", "attach", "portforward", "proxy", "binding", "ephemeralcontainers", "resize",
                          "scale")


class ApiServer(Verbs, Streams):
    def __init__(self, objects: Registry, nodes: Nodes, token: str,
                 streams_changed: Callable[[int], None] = lambda _open: None):
        """`streams_changed(open)`: a watch or log stream opened or closed (a client watching
        keeps the embedded cluster up)."""
        self.objects, self.nodes, self.token = objects, nodes, token
        self.kinds, self.store = objects.kinds, objects.store
        self.streams_changed = streams_changed
        self.open_streams = 0  # watches and log follows being served
        self.pager = Pager(self.store)
        self.schemas = CoreSchemas()  # the core kinds', warmed by whoever runs the server (start)
        self.fresh_timeout = freshness.BLOCK_SECONDS  # how long a read waits for a future resourceVersion
        self.faults = Faults()  # what a test breaks in the streams (faults.py); untouched in normal use
        self.app = web.Application(client_max_size=MAX_BODY,
                                   middlewares=[status_errors(log, self._refusal), self._authenticate])
        self.app.router.add_route("*", "/{tail:.*}", self._route)

    # ------------------------------------------------------------------ middleware

    @staticmethod
    def _refusal(exc: web.HTTPException) -> ApiError:
        if isinstance(exc, web.HTTPRequestEntityTooLarge):
            return too_large(MAX_BODY)
        return http_refusal(exc)

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
                return json_response(discovery.aggregated(self.kinds, core=parts == ["api"]),
                                     content_type=discovery.AGGREGATED)
            return json_response(discovery.core_versions() if parts == ["api"] else discovery.group_list(self.kinds))
        if parts == ["version"]:
            return json_response(discovery.VERSION)
        if parts in (["healthz"], ["livez"], ["readyz"]):
            return web.Response(text="ok")
        if parts == ["openapi", "v2"] and (openapi.V2_PROTOBUF_ASKED in accept or openapi.V2_PROTOBUF in accept):
            return web.Response(body=openapi.document_v2_protobuf(), headers={"Content-Type": openapi.V2_PROTOBUF})
        if parts and parts[0] == "openapi":
            if len(parts) > 2:
                await self.schemas.ready()
            doc = openapi.document(self.kinds, parts[1:], self.schemas)
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return json_response(doc)
        if len(parts) == 2 and parts[0] == "api":
            return self._or_404(discovery.resource_list(self.kinds, "", parts[1]))
        if len(parts) == 2 and parts[0] == "apis":
            return self._or_404(discovery.group(self.kinds, parts[1]))
        if len(parts) == 3 and parts[0] == "apis":
            return self._or_404(discovery.resource_list(self.kinds, parts[1], parts[2]))
        return None

    @staticmethod
    def _or_404(doc: dict[str, Any] | None) -> web.Response:
        if doc is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return json_response(doc)

    def _resource(self, group: str, version: str, rest: list[str]) -> Target:
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        kind = self.kinds.by_path(group, version, rest[0])
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
        return Target(kind, namespace, name, sub)

    # ------------------------------------------------------------------ dispatch (verbs.py, streams.py)

    async def _serve(self, request: web.Request, target: Target) -> web.StreamResponse:
        method, query = request.method, request.query
        if target.kind.group == "metrics.k8s.io":
            if method != "GET" or parse_bool(query, "watch"):
                raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {target.kind.plural}."
                                                        "metrics.k8s.io (get and list only)")
            return self._metrics(request, target)
        if target.subresource == "log":
            return await self._log(request, target)
        if target.subresource == "eviction":
            return await eviction.serve(self.objects, request, target)
        if method == "GET":
            if target.name is None:
                listing = options.list_options(request)
                if listing.watch:
                    return await self._watch(request, target, listing)
                return await self._list(request, target, listing)
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

    def _metrics(self, request: web.Request, target: Target) -> web.Response:
        items = self.nodes.metrics(target.kind, target.namespace)
        match = matcher(request, target.kind)
        items = [i for i in items if match(i)]
        if target.name is not None:
            found = [i for i in items if i["metadata"]["name"] == target.name]
            if not found:
                raise not_found(target.kind.plural, target.name, target.kind.group)
            return json_response(found[0])
        return json_response({"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                              "metadata": {}, "items": items})
