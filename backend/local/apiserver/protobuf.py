"""Request bodies in Kubernetes' protobuf encoding, for the kinds kubectl sends that way.

`kubectl create configmap|secret|namespace|serviceaccount` posts
`application/vnd.kubernetes.protobuf`: the magic `k8s\\0`, then a runtime.Unknown whose `raw` is
the object in the field numbers of k8s.io/api/core/v1/generated.proto. Only those kinds (and the
ObjectMeta they carry) are decoded; anything else gets 415, naming JSON as the way to send it.
Responses are always JSON (clients accept it).
"""

from __future__ import annotations

import base64
from typing import Any

from backend.local.registry.status import ApiError

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

# field number -> (json name, type); types: str, bytes, bool, int, ("map", value type),
# ("repeated", type), or a schema dict for a nested message.
_OBJECT_META = {1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"),
                11: ("labels", ("map", "str")), 12: ("annotations", ("map", "str")),
                14: ("finalizers", ("repeated", "str"))}
_REFERENCE = {1: ("kind", "str"), 2: ("namespace", "str"), 3: ("name", "str")}
SCHEMAS: dict[str, dict[int, Any]] = {
    "ConfigMap": {1: ("metadata", _OBJECT_META), 2: ("data", ("map", "str")), 3: ("binaryData", ("map", "bytes")),
                  4: ("immutable", "bool")},
    "Secret": {1: ("metadata", _OBJECT_META), 2: ("data", ("map", "bytes")), 3: ("type", "str"),
               4: ("stringData", ("map", "str")), 5: ("immutable", "bool")},
    "Namespace": {1: ("metadata", _OBJECT_META), 2: ("spec", {1: ("finalizers", ("repeated", "str"))})},
    "ServiceAccount": {1: ("metadata", _OBJECT_META), 2: ("secrets", ("repeated", _REFERENCE)),
                       3: ("imagePullSecrets", ("repeated", {1: ("name", "str")})),
                       4: ("automountServiceAccountToken", "bool")},
}
_UNKNOWN = {1: ("typeMeta", {1: ("apiVersion", "str"), 2: ("kind", "str")}), 2: ("raw", "bytes")}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes):
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _scalar(kind: str, value: Any) -> Any:
    if kind == "str":
        return value.decode()
    if kind == "bytes":
        return base64.b64encode(value).decode()  # JSON carries bytes as base64, as the API does
    if kind == "bool":
        return bool(value)
    return value


def _message(data: bytes, schema: dict[int, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _wire, value in _fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, dict):
            out[name] = _message(value, kind)
        elif isinstance(kind, tuple) and kind[0] == "map":
            entry = dict((n, v) for n, _w, v in _fields(value))
            out.setdefault(name, {})[entry.get(1, b"").decode()] = _scalar(kind[1], entry.get(2, b""))
        elif isinstance(kind, tuple) and kind[0] == "repeated":
            item = _message(value, kind[1]) if isinstance(kind[1], dict) else _scalar(kind[1], value)
            out.setdefault(name, []).append(item)
        elif value not in (b"", 0):  # an unset optional field: omitted, as in the JSON form
            out[name] = _scalar(kind, value)
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object, or 415 when its kind is not decoded here."""
    if not body.startswith(_MAGIC):
        raise ApiError(415, "UnsupportedMediaType", "protobuf body without the k8s magic prefix")
    try:
        unknown = _message(body[len(_MAGIC):], _UNKNOWN)
        type_meta = unknown.get("typeMeta") or {}
        kind = type_meta.get("kind", "")
        schema = SCHEMAS.get(kind)
        if schema is None:
            raise ApiError(415, "UnsupportedMediaType", f"the embedded cluster reads {kind or 'this kind'} in JSON "
                           "only (send application/json; kubectl apply -f does)")
        obj = _message(base64.b64decode(unknown.get("raw", "")), schema)
    except (ValueError, UnicodeDecodeError, IndexError) as exc:
        raise ApiError(400, "BadRequest", f"the protobuf request body could not be decoded: {exc}") from None
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
