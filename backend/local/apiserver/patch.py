"""The PATCH bodies an API server takes: JSON merge (RFC 7386), JSON patch (RFC 6902) and strategic
merge (lists merged by their patchMergeKey, `$patch` directives); server-side apply's
configuration is the registry's (generic.py `apply`, managed_fields.py). A custom resource takes
no strategic merge patch, as apiextensions-apiserver's handler lists its patch types
(customresource_handler.go: JSON patch, merge patch, apply): 415 for one.
"""

from __future__ import annotations

import copy
from typing import Any

from backend.local.registry import crds
from backend.local.registry.kinds import Kind
from backend.local.registry.merge import merge_patch, strategic_merge
from backend.local.registry.status import ApiError, bad_request

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
TYPES = [JSON_PATCH, MERGE, STRATEGIC, APPLY]
CUSTOM_TYPES = [JSON_PATCH, MERGE, APPLY]
MAX_OPERATIONS = 10000  # maxJSONPatchOperations


def accepted(kind: Kind) -> list[str]:
    """The patch types the kind takes (what its OpenAPI PATCH operation lists: kubectl apply
    sends a strategic merge patch only where it is listed)."""
    return CUSTOM_TYPES if crds.schema(kind.kind) is not None else TYPES


def check_type(kind: Kind, content_type: str) -> None:
    """415 for a patch type the kind does not take (negotiation.NewUnsupportedMediaTypeError)."""
    if content_type not in accepted(kind):
        raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                                                    f"media types include: {', '.join(accepted(kind))}")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"json patch: path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, list):
            try:
                doc = doc[int(part)]
            except (ValueError, IndexError):
                raise bad_request(f"json patch: no element {part!r}") from None
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            raise bad_request(f"json patch: path element {part!r} does not exist")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise bad_request("json patch: the body must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request("json patch: each operation needs 'op' and 'path'")
        parts = _pointer(op["path"])
        name = op["op"]
        if name == "test":
            if _resolve(doc, parts) != op.get("value"):
                raise ApiError(422, "Invalid", f"json patch: test failed at {op['path']}")
            continue
        if name in ("move", "copy"):
            value = copy.deepcopy(_resolve(doc, _pointer(op.get("from", ""))))
            if name == "move":
                doc = _remove(doc, _pointer(op["from"]))
            doc = _add(doc, parts, value)
        elif name == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif name == "remove":
            doc = _remove(doc, parts)
        elif name == "replace":
            _resolve(doc, parts)
            doc = _add(_remove(doc, parts), parts, copy.deepcopy(op.get("value")))
        else:
            raise bad_request(f"json patch: unknown operation {name!r}")
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                parent.insert(int(last), value)
            except ValueError:
                raise bad_request(f"json patch: {last!r} is not a list index") from None
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise bad_request("json patch: cannot add inside a scalar")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise bad_request("json patch: cannot remove the whole document")
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    try:
        if isinstance(parent, list):
            parent.pop(int(last))
        else:
            del parent[last]
    except (KeyError, ValueError, IndexError, TypeError):
        raise bad_request(f"json patch: nothing to remove at {last!r}") from None
    return doc


def apply_patch(live: dict[str, Any], content_type: str, body: Any) -> Any:
    """The object after a JSON, merge or strategic PATCH (body already decoded)."""
    if content_type == MERGE:
        return merge_patch(live, body)
    if content_type == JSON_PATCH:
        if isinstance(body, list) and len(body) > MAX_OPERATIONS:
            raise ApiError(413, "RequestEntityTooLarge", f"The allowed maximum operations in a JSON patch is "
                                                         f"{MAX_OPERATIONS}, got {len(body)}")
        return json_patch(live, body)
    if content_type == STRATEGIC:
        if not isinstance(body, dict):
            raise bad_request("strategic merge patch: the body must be an object")
        return strategic_merge(live, body)
    raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                   f"accepted media types include: {', '.join(TYPES)}")
