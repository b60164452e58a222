"""Field errors as k8s.io/apimachinery's validation/field package writes them, and the Status
errors an API server and a webhook send with them.

`FieldError(type, field, value, detail)` renders as `field.Error.Error()` does at apimachinery
v0.36 (`spec.trainer.numNodes: Invalid value: 0: ...`, `Required value`, `Unsupported value:
"x": supported values: "a", "b"`, `Too long: may not be more than 63 bytes`): a string value is
quoted, a number or bool printed bare, anything else marshalled as Go's encoding/json would (map
keys sorted; `GoJSON` carries a value already marshalled in a Go struct's field order). A list
of errors aggregates as `ErrorList.ToAggregate()` does: duplicates dropped, one message alone,
several as `[a, b]`. `invalid` is apierrors.NewInvalid; `denied` is what kube-apiserver makes of
a webhook's rejection (webhook/errors.ToStatusErr).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from backend.local.registry.status import ApiError

# field.ErrorType: the cause type, and the words its message starts with
INVALID = ("FieldValueInvalid", "Invalid value")
TYPE_INVALID = ("FieldValueTypeInvalid", "Invalid value")
REQUIRED = ("FieldValueRequired", "Required value")
NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
FORBIDDEN = ("FieldValueForbidden", "Forbidden")
TOO_LONG = ("FieldValueTooLong", "Too long")
TOO_SHORT = ("FieldValueTooShort", "Too short")
TOO_MANY = ("FieldValueTooMany", "Too many")
INTERNAL = ("InternalError", "Internal error")
_NO_VALUE = {REQUIRED, FORBIDDEN, TOO_LONG, TOO_SHORT, INTERNAL}
OMIT = object()  # field.OmitValueType{}: the message names no value


class GoJSON(str):
    """A value already rendered as Go's json.Marshal would (a struct's fields in declaration order)."""


def go_struct(value: dict[str, Any], order: tuple[str, ...], always: dict[str, Any] | None = None) -> GoJSON:
    """json.Marshal of a Go struct held as a dict: its fields in declaration order (`order`; others
    after, as given), `always` for non-pointer struct fields that are never omitted."""
    fields = {**(always or {}), **value}
    ordered = {k: fields[k] for k in order if k in fields}
    ordered.update({k: v for k, v in fields.items() if k not in ordered})
    return GoJSON(go_json_ordered(ordered))


def go_list(items: list[Any], order: tuple[str, ...], always: dict[str, Any] | None = None) -> GoJSON:
    """json.Marshal of a Go slice of structs."""
    return GoJSON("[" + ",".join(go_struct(i, order, always) if isinstance(i, dict) else go_json(i)
                                 for i in items) + "]")


def go_json_ordered(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def go_json(value: Any) -> str:
    """encoding/json of an unstructured value: map keys sorted, <, > and & escaped."""
    if isinstance(value, GoJSON):
        return str(value)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def go_value(value: Any) -> str:
    """How ErrorBody prints a bad value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # Go's %v of a float64: %g, so 1.0 prints "1"
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, str) and not isinstance(value, GoJSON):
        return json.dumps(value, ensure_ascii=False)
    return go_json(value)


@dataclass(frozen=True)
class FieldError:
    type: tuple[str, str]
    field: str | None  # None: a nil field.Path, printed "<nil>"
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        text = self.type[1]
        if self.type not in _NO_VALUE and self.value is not OMIT:
            text = f"{text}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{'<nil>' if self.field is None else self.field}: {self.body()}"


def required(field: str | None, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, field, "", detail)


def invalid_value(field: str | None, value: Any, detail: str) -> FieldError:
    return FieldError(INVALID, field, value, detail)


def forbidden(field: str | None, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, field, "", detail)


def internal(field: str | None, detail: str) -> FieldError:
    return FieldError(INTERNAL, field, OMIT, detail)


def not_supported(field: str | None, value: Any, allowed: list[Any]) -> FieldError:
    quoted = ", ".join(json.dumps(v if isinstance(v, str) else go_json(v)) for v in allowed)
    return FieldError(NOT_SUPPORTED, field, value, f"supported values: {quoted}" if allowed else "")


def too_long(field: str | None, limit: int) -> FieldError:
    unit = "byte" if limit == 1 else "bytes"
    return FieldError(TOO_LONG, field, OMIT, f"may not be more than {limit} {unit}" if limit >= 0
                      else "value is too long")


def too_many(field: str | None, actual: int, limit: int) -> FieldError:
    unit = "item" if limit == 1 else "items"
    return FieldError(TOO_MANY, field, actual if actual >= 0 else OMIT,
                      f"must have at most {limit} {unit}" if limit >= 0 else "has too many items")


def aggregate(errors: list[FieldError] | list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): duplicates once; one alone; several as [a, b]."""
    seen: list[str] = []
    for error in errors:
        if str(error) not in seen:
            seen.append(str(error))
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def invalid(qualified_kind: str, name: str, errors: list[FieldError]) -> ApiError:
    """apierrors.NewInvalid(GroupKind, name, errs): 422 with one cause per error."""
    kind, _, group = qualified_kind.partition(".")
    details: dict[str, Any] = {"name": name, "kind": kind,
                               "causes": [{"reason": e.type[0], "message": e.body(),
                                           "field": "<nil>" if e.field is None else e.field} for e in errors]}
    if group:
        details["group"] = group
    message = f'{qualified_kind} "{name}" is invalid'
    return ApiError(422, "Invalid", f"{message}: {aggregate(errors)}" if errors else message, details)


def denied(webhook: str, error: ApiError | str) -> ApiError:
    """A validating webhook's rejection as the API server returns it: a plain error is a 403
    (controller-runtime's admission.Denied); a Status the webhook sent keeps its code and causes."""
    prefix = f'admission webhook "{webhook}" denied the request: '
    if isinstance(error, ApiError):
        return ApiError(error.code, error.reason, prefix + error.message, error.details)
    return ApiError(403, "Forbidden", prefix + error)
