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

from backend.local.apiserver import duplicate_fields, patch, protobuf
from backend.local.registry.kinds import Kind
from backend.local.apiserver.selectors import field_matcher, label_matcher
from backend.local.registry.status import bad_request, too_large, unsupported_media

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's request size limit
DUPLICATES = web.RequestKey("duplicate_fields", list)  # the fields a request's body gives twice
# How deep a body may nest and how many values it may hold once decoded. Upstream's decoder
# allows 10,000 levels (encoding/json's maxNestingDepth); here everything past the decoder
# recurses in Python, so the bound is lower, far above any object Kubernetes defines. The
# value count stops a YAML body whose aliases expand it (go-yaml's "excessive aliasing").
MAX_DEPTH = 100
MAX_VALUES = 1_000_000
GO_TRUE = ("1", "t", "T", "true", "TRUE", "True")  # strconv.ParseBool's true and false
GO_FALSE = ("0", "f", "F", "false", "FALSE", "False")


class Target:
    """What a resource request's path names: a kind, maybe a namespace, name and subresource."""

    def __init__(self, kind: Kind, namespace: str | None, name: str | None, subresource: str | None):
        self.kind, self.namespace, self.name, self.subresource = kind, namespace, name, subresource


def resource_name(kind: Kind) -> str:
    """The GroupResource as errors name it: `pods`, `trainjobs.trainer.kubeflow.org`."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


async def read_body(request: web.Request) -> Any:
    """The body, decoded; the fields it gives twice left under request[DUPLICATES]."""
    raw = await request.read()
    if len(raw) > MAX_BODY:
        raise too_large(MAX_BODY)
    content_type = request.content_type
    request[DUPLICATES] = []
    if content_type == protobuf.CONTENT_TYPE:
        return protobuf.decode(raw)
    if content_type not in ("application/json", "application/yaml", "", *patch.TYPES):
        raise unsupported_media(content_type, ["application/json", "application/yaml", *patch.TYPES])
    return decode(raw, "yaml" if content_type in ("application/yaml", patch.APPLY) else "json", request[DUPLICATES])


def decode(raw: bytes, form: str, duplicates: list[str] | None = None) -> Any:
    """A JSON or YAML body, bounded (MAX_DEPTH, MAX_VALUES); 400 for one that is not. The fields
    it gives twice (the last one wins, as Go's decoders take it) are added to `duplicates`, in
    the strict decoder's words (duplicate_fields.py)."""
    try:
        if form == "yaml":
            body = duplicate_fields.yaml_body(raw.decode(), duplicates)
        else:
            body = duplicate_fields.json_body(raw or b"null", duplicates)
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise bad_request(f"the request body is not valid {form.upper()}: {(str(exc).splitlines() or [''])[0]}") \
            from None
    _check_bounds(body)
    return body


def _too_deep() -> Exception:
    return bad_request(f"the request body nests deeper than {MAX_DEPTH} levels (the embedded cluster's limit)")


def _check_bounds(body: Any) -> None:
    """Walked without recursion: a body within MAX_DEPTH levels and MAX_VALUES values."""
    stack, seen = [(body, 1)], 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise bad_request(f"the request body holds more than {MAX_VALUES} values")
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise _too_deep()
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)


# DeleteOptions' fields and the JSON types they decode from (meta/v1 types.go)
_DELETE_FIELDS: dict[str, tuple[type, ...]] = {
    "gracePeriodSeconds": (int,), "propagationPolicy": (str,), "orphanDependents": (bool,),
    "preconditions": (dict,), "dryRun": (list,), "kind": (str,), "apiVersion": (str,),
    "ignoreStoreReadErrorWithClusterBreakingPotential": (bool,)}


async def delete_options(request: web.Request) -> dict[str, Any]:
    """DeleteOptions from the body and the query; 400 for a body that does not decode into one."""
    raw = await request.read()
    if len(raw) > MAX_BODY:
        raise too_large(MAX_BODY)
    options = decode(raw, "json") if raw.strip() else {}
    if not isinstance(options, dict):
        raise bad_request("DeleteOptions: the body must be a JSON object")
    for key, value in options.items():
        types = _DELETE_FIELDS.get(key)
        if value is not None and types is not None and (not isinstance(value, types) or
                                                        (isinstance(value, bool) and bool not in types)):
            raise bad_request(f"DeleteOptions: {key} has the wrong type ({type(value).__name__})")
    preconditions = options.get("preconditions") or {}
    if not all(isinstance(preconditions.get(k, ""), (str, type(None))) for k in ("uid", "resourceVersion")):
        raise bad_request("DeleteOptions: preconditions.uid and resourceVersion must be strings")
    if "gracePeriodSeconds" in request.query:
        options["gracePeriodSeconds"] = parse_int(request.query, "gracePeriodSeconds")
    for value in request.query.getall("dryRun", []):
        options["dryRun"] = [*(options.get("dryRun") or []), value]
    return options


def parse_bool(query: Any, name: str) -> bool | None:
    """strconv.ParseBool of a query parameter; None when absent."""
    value = query.get(name)
    if value is None:
        return None
    if value in GO_TRUE:
        return True
    if value in GO_FALSE:
        return False
    raise bad_request(f'strconv.ParseBool: parsing {json.dumps(value)}: invalid syntax')


def parse_int(query: Any, name: str) -> int | None:
    """strconv.ParseInt(value, 10, 64) of a query parameter; None when absent."""
    value = query.get(name)
    if value is None:
        return None
    text = value[1:] if value[:1] in "+-" else value
    if not text.isascii() or not text.isdigit():
        raise bad_request(f'strconv.ParseInt: parsing {json.dumps(value)}: invalid syntax')
    number = int(value)
    if not -(2 ** 63) <= number < 2 ** 63:
        raise bad_request(f'strconv.ParseInt: parsing {json.dumps(value)}: value out of range')
    return number


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
