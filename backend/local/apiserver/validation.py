"""Field validation (`fieldValidation=Strict|Warn|Ignore`) and the schemas behind it.

A custom resource's unknown fields are what its CRD's structural schema prunes (crds/, as
apiextensions-apiserver does: `x-kubernetes-preserve-unknown-fields` keeps a subtree's, the root
metadata is ObjectMeta); a core kind's are those its upstream model's schema lacks (schemas.py).
Strict refuses them, and fields the body gives twice (duplicate_fields.py), with the decoder's
`strict decoding error: duplicate field "data.a", unknown field "spec.x"`, Warn
returns them as warnings (the default when the client does not say), Ignore says nothing; the
custom resource's are then pruned by its admission.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backend.local.registry import crds
from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError

if TYPE_CHECKING:
    from backend.local.apiserver.schemas import CoreSchemas


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        elif "anyOf" in node:
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            objects = [o for o in options if "$ref" in o or o.get("type") in ("object", "array")]
            node = objects[0] if len(objects) == 1 else {}
        elif "allOf" in node and len(node["allOf"]) == 1:
            node = node["allOf"][0]
        else:
            return node


def unknown_fields(obj: Any, kind_name: str, core: "CoreSchemas") -> list[str]:
    """Dotted paths of the fields `obj` has that its kind's schema does not declare."""
    pruned = crds.unknown_fields(kind_name, obj)
    if pruned is not None:
        return pruned
    doc = core.schema(kind_name)
    if doc is None:
        return []
    found: list[str] = []
    _walk(obj, doc, doc.get("$defs", {}), "", found)
    return found


def drop_unknown(kind: Kind, obj: dict[str, Any], warned: list[str], mode: str, core: "CoreSchemas") -> None:
    """Remove from a core kind's object the fields its schema lacks, as decoding the body into
    the kind's Go type drops them (a custom resource's are pruned by its admission). `warned`:
    what `check` found in `mode`; nothing to remove when it looked and found nothing."""
    if not warned and mode != "Ignore":
        return
    doc = core.schema(kind.kind) if crds.schema(kind.kind) is None else None
    if doc is not None:
        _walk(obj, doc, doc.get("$defs", {}), "", [], drop=True)


def _walk(value: Any, node: dict[str, Any], defs: dict[str, Any], path: str, found: list[str],
          drop: bool = False) -> None:
    node = _resolve(node, defs)
    if isinstance(value, dict):
        properties = node.get("properties")
        if properties is None:
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                for key, item in value.items():
                    _walk(item, extra, defs, f"{path}[{key}]", found, drop)
            return
        for key, item in list(value.items()):
            if key not in properties:
                found.append(f"{path}.{key}".lstrip("."))
                if drop:
                    del value[key]
            else:
                _walk(item, properties[key], defs, f"{path}.{key}", found, drop)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            _walk(item, node["items"], defs, f"{path}[{i}]", found, drop)


def check(kind: Kind, obj: dict[str, Any], mode: str, core: "CoreSchemas",
          duplicates: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Warnings to return (Warn), or ApiError 400 (Strict), for the fields the schema lacks and
    those the body gave twice (`duplicates`, as duplicate_fields.py words them)."""
    mode = mode or "Warn"  # upstream's default when the client does not say
    if mode not in ("Strict", "Warn", "Ignore"):
        raise ApiError(400, "BadRequest", f"fieldValidation must be one of Strict, Warn, Ignore (got {mode!r})")
    if mode == "Ignore":
        return []
    said = [f'duplicate field "{path}"' if not path.startswith("yaml:") else path for path in duplicates]
    unknown = unknown_fields(obj, kind.kind, core)
    said += [f'unknown field "{path}"' for path in unknown]
    if said and mode == "Strict":
        raise ApiError(400, "BadRequest", f'{kind.kind} in version "{kind.version}" cannot be handled as a '
                                          f"{kind.kind}: strict decoding error: {', '.join(said)}")
    return said
