"""The CRD engine: the custom resources the embedded cluster serves (Trainer v2.3.0, JobSet
v0.12.0, KubeRay v1.7.0, external-snapshotter v8.6.0) judged by their CRDs, as kube-apiserver's
apiextensions judges them: the schemas (vendored in data/, refreshed by refresh.py), pruning,
defaults, list types and CEL rules. Pure functions over JSON objects. The projects' webhooks are
not here: each kind's strategy carries its own (strategy.py `Webhooks`; upstream/ holds them),
and `admit` runs them in their place in the order.

This face:
    admit(kind, operation, obj, old, webhooks, reader, now) -> warnings   a write's admission
    admit_status(kind, obj, old) -> warnings     a write to a custom resource's status
    unknown_fields(kind, obj) -> paths | None    what fieldValidation judges (None: no CRD)
    schema(kind) -> openAPIV3Schema | None       what `kubectl explain` shows (openapi.py)

The order of `admit`, kube-apiserver's: the body pruned of undeclared fields (fieldValidation has
judged them already) and non-nullable nulls, structural defaults; the kind's mutating webhook;
pruned and defaulted again; status dropped on create (the status subresource owns it); the schema,
list-type and CEL validation (CEL skipped, with upstream's note, when a blocking error such as a
wrong type or a missing required field came first); then the kind's validating webhook. A kind
without a CRD (a Pod) has its webhooks run alone.

Its modules import each other by their own names, never through this face.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import backend.local.registry.crds.catalog as catalog
import backend.local.registry.crds.listtype as listtype
import backend.local.registry.crds.openapi_schema as openapi_schema
import backend.local.registry.crds.structural as structural
import backend.local.registry.crds.validation_rules as validation_rules
from backend.local.registry import fielderrors as fe
from backend.local.registry.strategy import Reader, Webhooks

KINDS = catalog.kinds()
_BLOCKING = {fe.NOT_SUPPORTED, fe.REQUIRED, fe.TOO_LONG, fe.TOO_MANY, fe.TYPE_INVALID}
_UNCHECKED = fe.invalid_value(None, None, "some validation rules were not checked because the object was invalid; "
                                          "correct the existing errors to complete validation")

__all__ = ["KINDS", "admit", "admit_status", "schema", "unknown_fields"]


def schema(kind: str) -> dict[str, Any] | None:
    found = catalog.crd(kind)
    return found.schema if found else None


def unknown_fields(kind: str, obj: dict[str, Any]) -> list[str] | None:
    """The paths pruning would drop from `obj` (sorted), or None for a kind without a CRD."""
    found = catalog.crd(kind)
    return None if found is None else structural.prune(copy.deepcopy(obj), found.schema)


def admit_status(kind: str, obj: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """A write to a custom resource's status subresource, as the API server's customresource
    status strategy takes it: pruned and defaulted, then the whole object validated against the
    schema and its CEL rules (no webhook: their rules name the resource, not its /status)."""
    crd = catalog.crd(kind)
    if crd is None:
        return []
    old = copy.deepcopy(old)
    _normalize(old, crd.schema)
    _normalize(obj, crd.schema)
    return _validate(crd, obj, old)


def _normalize(obj: dict[str, Any], schema: dict[str, Any]) -> None:
    structural.prune(obj, schema)
    structural.drop_nulls(obj, schema)
    structural.default(obj, schema)


def _validate(crd: catalog.Crd, obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    errors = openapi_schema.validate(obj, crd.schema, old)
    if old is None or not listtype.validate(old, crd.schema):
        errors += listtype.validate(obj, crd.schema)
    warnings: list[str] = []
    if any(e.type in _BLOCKING for e in errors):
        errors.append(_UNCHECKED)
    else:
        rule_errors, warnings = validation_rules.validate(obj, crd.schema, old)
        errors += rule_errors
    if errors:
        raise fe.invalid(crd.qualified_kind, obj["metadata"]["name"], errors)
    return warnings


def admit(kind: str, operation: str, obj: dict[str, Any], old: dict[str, Any] | None, webhooks: Webhooks,
          reader: Reader, now: str | None = None) -> list[str]:
    """Admit a CREATE or UPDATE as upstream does (see the module's doc); `obj` is changed in place."""
    crd = catalog.crd(kind)
    now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if crd is not None:
        if old is not None:  # the API server defaults what it reads from storage too (stored before a default existed)
            old = copy.deepcopy(old)
            _normalize(old, crd.schema)
        _normalize(obj, crd.schema)
    if webhooks.mutate is not None and operation in webhooks.mutate_on:
        webhooks.mutate(obj, old, now, reader)
    warnings: list[str] = []
    if crd is not None:
        _normalize(obj, crd.schema)  # a mutating webhook's result is pruned and defaulted again
        if operation == "CREATE" and "status" in crd.subresources:
            obj.pop("status", None)
        warnings = _validate(crd, obj, old)
    if webhooks.validate is not None and operation in webhooks.validate_on:
        warnings += webhooks.validate(obj, old, reader)
    return warnings
