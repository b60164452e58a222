"""What every request and response of the API server shares on the wire: reading a body
(JSON, YAML, protobuf, patches) and DeleteOptions, query flags as Go reads them, label and field
selectors, JSON answers. Knows no verb and no store: server.py, verbs.py and streams.py decide
what to do with them.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from aiohttp import web

from backend.local.apiserver import patch, protobuf
from backend.local.registry.kinds import Kind
from backend.local.apiserver.selectors import field_matcher, label_matcher
from backend.local.registry.status import bad_request, too_large, unsupported_media

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's request size limit


class Target:
    """What a resource request's path names: a kind, maybe a namespace, name and subresource."""

    def __init__(self, kind: Kind, namespace: str | None, name: str | None, subresource: str | None):
        self.kind, self.namespace, self.name, self.subresource = kind, namespace, name, subresource


async def read_body(request: web.Request) -> Any:
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


async def delete_options(request: web.Request) -> dict[str, Any]:
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


class Replay:
    """A request whose body was already read (server-side apply creating the object)."""

    def __init__(self, request: web.Request, body: Any):
        self._request, self._body = request, body
        self.query, self.headers, self.content_type = request.query, request.headers, "application/json"

    async def read(self) -> bytes:
        return json.dumps(self._body).encode()


def flag(value: str | None) -> bool:
    """A boolean query parameter as Go's strconv.ParseBool reads it ("true", "True", "1", "t"...)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    first = accept.split(",")[0]
    return "as=Table" in first


def json_response(body: Any, code: int = 200, content_type: str = "application/json") -> web.Response:
    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=code,
                        headers={"Content-Type": content_type})


def matcher(request: web.Request, kind: Kind):
    """The request's labelSelector and fieldSelector as one predicate over objects."""
    labels = label_matcher(request.query.get("labelSelector"))
    fields = field_matcher(request.query.get("fieldSelector"), kind.kind)
    return lambda obj: labels(obj) and fields(obj)
