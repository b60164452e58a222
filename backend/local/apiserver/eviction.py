"""POST pods/<name>/eviction over HTTP: the body checked (a policy/v1 or v1beta1 Eviction, as
EvictionREST accepts both) and handed to the registry's eviction (registry/eviction.py), which
honours PodDisruptionBudgets. Its own file so the protocol's other verbs stay apart."""

from __future__ import annotations

from aiohttp import web

from backend.local.apiserver.wire import Target, json_response, read_body
from backend.local.registry.eviction import evict
from backend.local.registry.generic import Registry
from backend.local.registry.status import ApiError, bad_request

_VERSIONS = ("policy/v1", "policy/v1beta1")


async def serve(registry: Registry, request: web.Request, target: Target) -> web.Response:
    if request.method != "POST":
        raise ApiError(405, "MethodNotAllowed", f"{request.method} is not supported on pods/eviction (POST an "
                                                "Eviction)")
    body = await read_body(request)
    if not isinstance(body, dict) or body.get("kind") != "Eviction" or body.get("apiVersion") not in _VERSIONS:
        raise bad_request("the request body must be a policy/v1 Eviction")
    status = evict(registry, target.namespace or "default", target.name or "", body)
    return json_response(status, status.get("code", 201))
