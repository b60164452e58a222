"""Schema validation of a custom resource as kube-apiserver does it: k8s.io/kube-openapi
pkg/validation/validate (the validator apiextensions-apiserver v0.36 runs on the CRD's
openAPIV3Schema) with its errors turned into field errors by apiextensions-apiserver
pkg/apiserver/validation/validation.go (kubeOpenAPIResultToFieldErrors).

Per node, in kube-openapi's order: the type (`spec.x: Invalid value: "string": spec.x in body
must be of type integer: "string"`; `x-kubernetes-int-or-string` is "integer,string"), anyOf,
the string checks (`Too long: may not be more than N bytes`, `... in body should be at least N
chars long`, `... in body should match '<pattern>'`), the date-time format, the number checks
(int32/int64 range, minimum, maximum), the list checks (items, `... should have at least N
items`, `Too many: N: must have at most M items`), enum (`Unsupported value: "x": supported
values: ...`), then the object's properties and `Required value`. On update, a value equal to
its correlated old value is not checked again (CRDValidationRatcheting, GA): an object kept
valid under an older schema stays updatable. Correlation follows maps by key and list-type=map
items by their keys, as apiextensions' CorrelatedObject does.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from typing import Any

from backend.local.registry import fielderrors as fe
from backend.local.registry.fielderrors import FieldError
from backend.local.registry.crds.structural import additional

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# kube-openapi strfmt's date-time: RFC 3339 with optional fractions and a zone
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})$")


@lru_cache(maxsize=512)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def types_of(schema: dict[str, Any]) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    return [schema["type"]] if schema.get("type") else []


def _number_fits(value: int | float, fmt: str) -> bool:
    if isinstance(value, float):
        return True  # float64 needs no range check
    low, high = _INT32 if fmt == "int32" else _INT64
    return low <= value <= high


def _valid_date_time(text: str) -> bool:
    if not _DATE_TIME.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00").replace("t", "T"))
    except ValueError:
        return False
    return True


def correlate_item(schema: dict[str, Any], item: Any, old_list: Any) -> Any:
    """The old item a list-type=map item corresponds to (by its keys), else None."""
    if not isinstance(old_list, list) or schema.get("x-kubernetes-list-type") != "map" or not isinstance(item, dict):
        return None
    keys = schema.get("x-kubernetes-list-map-keys") or []
    for old in old_list:
        if isinstance(old, dict) and all(old.get(k) == item.get(k) for k in keys):
            return old
    return None


class _Validator:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def node(self, value: Any, schema: dict[str, Any], path: str, old: Any = None) -> None:
        if old is not None and old == value:
            return  # ratcheting: unchanged, not judged again
        types = types_of(schema)
        kind = json_type(value)
        if value is None:
            if types and not schema.get("nullable"):
                self.errors.append(self._type_error(path, ",".join(types), "null"))
            return
        self._type(value, kind, types, schema.get("format", ""), path)
        if "anyOf" in schema:
            self._any_of(value, schema["anyOf"], path)
        if kind == "string":
            self._string(value, schema, path)
        if kind in ("integer", "number"):
            self._number(value, schema, types, path)
        if kind == "array":
            self._array(value, schema, path, old)
        if "enum" in schema and value not in schema["enum"]:
            self.errors.append(fe.not_supported(path, value, schema["enum"]))
        if kind == "object":
            self._object(value, schema, path, old)

    def _type_error(self, path: str, wanted: str, got: str) -> FieldError:
        return FieldError(fe.TYPE_INVALID, path, got, f'{path} in body must be of type {wanted}: "{got}"')

    def _type(self, value: Any, kind: str, types: list[str], fmt: str, path: str) -> None:
        if not types and not fmt:
            return
        float_int = kind == "number" and float(value).is_integer() and "integer" in types
        int_float = kind == "integer" and "number" in types
        inferred = {"integer": "int64", "number": "double"}.get(kind, "")
        if kind not in ("string", "array") and fmt and not (kind in types or inferred == fmt or float_int or int_float
                                                           or (fmt == "int64" and inferred == "int32")):
            self.errors.append(self._type_error(path, fmt, inferred))
            return
        if not ("number" in types or "integer" in types) and fmt and kind in ("string", "array"):
            return
        if not (kind in types or float_int or int_float):
            self.errors.append(self._type_error(path, ",".join(types), kind))

    def _any_of(self, value: Any, options: list[dict[str, Any]], path: str) -> None:
        failures = []
        for option in options:
            sub = _Validator()
            sub.node(value, option, path)
            if not sub.errors:
                return
            failures.append(sub.errors)
        self.errors.append(fe.invalid_value(None, "", f'"{path}" must validate at least one schema (anyOf)'))
        self.errors.extend(failures[0])

    def _string(self, value: str, schema: dict[str, Any], path: str) -> None:
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            self.errors.append(fe.too_long(path, schema["maxLength"]))
        elif "minLength" in schema and len(value) < schema["minLength"]:
            self.errors.append(fe.invalid_value(path, value, f"{path} in body should be at least "
                                                              f"{schema['minLength']} chars long"))
        elif "pattern" in schema and not _pattern(schema["pattern"]).search(value):
            self.errors.append(fe.invalid_value(path, value, f"{path} in body should match '{schema['pattern']}'"))
        if schema.get("format") == "date-time" and not _valid_date_time(value):
            self.errors.append(self._type_error(path, "date-time", value))

    def _number(self, value: int | float, schema: dict[str, Any], types: list[str], path: str) -> None:
        typed = types[0] if len(types) == 1 else ""
        fmt = schema.get("format", "") if typed == "integer" and schema.get("format") in ("int32", "int64") else ""
        if typed != "number" and not _number_fits(value, fmt):
            shown = f"with format {fmt}" if fmt else "(default format)"
            self.errors.append(fe.invalid_value(None, "", f"Checked value must be of type {typed or 'integer'} "
                                                          f"{shown} in {path}"))
        for bound, exclusive, word in (("minimum", "exclusiveMinimum", "greater than"),
                                       ("maximum", "exclusiveMaximum", "less than")):
            if bound not in schema:
                continue
            limit = schema[bound]
            excl = bool(schema.get(exclusive))
            beyond = (value < limit or (excl and value == limit)) if bound == "minimum" else \
                (value > limit or (excl and value == limit))
            if beyond:
                shown = fe.go_value(int(limit) if isinstance(value, int) else float(limit))
                self.errors.append(fe.invalid_value(path, value, f"{path} in body should be {word}"
                                                                 f"{'' if excl else ' or equal to'} {shown}"))

    def _array(self, value: list[Any], schema: dict[str, Any], path: str, old: Any) -> None:
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                self.node(item, items, f"{path}[{i}]", correlate_item(schema, item, old))
        if "minItems" in schema and len(value) < schema["minItems"]:
            self.errors.append(fe.invalid_value(path, len(value), f"{path} in body should have at least "
                                                                  f"{schema['minItems']} items"))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.errors.append(fe.too_many(path, len(value), schema["maxItems"]))

    def _object(self, value: dict[str, Any], schema: dict[str, Any], path: str, old: Any) -> None:
        props = schema.get("properties") or {}
        olds = old if isinstance(old, dict) else {}
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            self.errors.append(fe.too_many(path, len(value), schema["maxProperties"]))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            self.errors.append(fe.invalid_value(path, len(value), f"{path} in body should have at least "
                                                                  f"{schema['minProperties']} properties"))
        extra = additional(schema)
        for key, item in value.items():
            sub_path = f"{path}.{key}" if path else key
            if key in props:
                self.node(item, props[key], sub_path, olds.get(key))
            elif extra is not None:
                self.node(item, extra, sub_path, olds.get(key))
        for key in schema.get("required") or []:
            if key not in value:
                self.errors.append(fe.required(f"{path}.{key}" if path else key))


def validate(obj: Any, schema: dict[str, Any], old: Any = None) -> list[FieldError]:
    """The schema's field errors for `obj` (with `old` on update, for ratcheting)."""
    validator = _Validator()
    validator.node(obj, schema, "", old)
    return validator.errors
