"""x-kubernetes-list-type invariants (k8s.io/apiextensions-apiserver v0.36
pkg/apiserver/schema/listtype/validation.go): a `set` holds each value once, a `map` holds each
combination of its `x-kubernetes-list-map-keys` once and only objects. The first repeat of a
value is reported, `spec.x[2]: Duplicate value: {"name":"a"}`.
"""

from __future__ import annotations

from typing import Any

from backend.local.registry import fielderrors as fe
from backend.local.registry.fielderrors import FieldError
from backend.local.registry.crds.structural import child

_UNSET = object()


def _first_repeats(values: list[Any]) -> list[int]:
    """Indices of each value's second appearance (validateListSet)."""
    seen: dict[str, int] = {}
    repeats = []
    for i, value in enumerate(values):
        key = "unset" if value is _UNSET else fe.go_json(value)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            repeats.append(i)
    return repeats


def _list_errors(value: list[Any], schema: dict[str, Any], path: str) -> list[FieldError]:
    kind = schema.get("x-kubernetes-list-type")
    if kind == "set":
        return [FieldError(fe.DUPLICATE, f"{path}[{i}]", value[i]) for i in _first_repeats(value)]
    if kind != "map":
        return []
    for i, item in enumerate(value):
        if item is not None and not isinstance(item, dict):
            return [fe.invalid_value(f"{path}[{i}]", item, "must be an object for an array of list-type map")]
    names = schema.get("x-kubernetes-list-map-keys") or []
    if len(names) == 1:
        keys = [_UNSET if not isinstance(item, dict) or names[0] not in item else item[names[0]] for item in value]
        return [FieldError(fe.DUPLICATE, f"{path}[{i}]", {} if keys[i] is _UNSET else {names[0]: keys[i]})
                for i in _first_repeats(keys)]
    keys = [{n: item[n] for n in names if n in item} if isinstance(item, dict) else {} for item in value]
    return [FieldError(fe.DUPLICATE, f"{path}[{i}]", keys[i]) for i in _first_repeats(keys)]


def validate(value: Any, schema: dict[str, Any] | None, path: str = "") -> list[FieldError]:
    if schema is None:
        return []
    errors: list[FieldError] = []
    if isinstance(value, dict):
        for key, item in value.items():
            errors += validate(item, child(schema, key), f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        errors += _list_errors(value, schema, path)
        items = schema.get("items")
        for i, item in enumerate(value):
            errors += validate(item, items if isinstance(items, dict) else None, f"{path}[{i}]")
    return errors
