"""What the API server does to a custom resource's body before validating it, on the structural
schema (k8s.io/apiextensions-apiserver v0.36 pkg/apiserver/schema):

- `prune` (pruning/algorithm.go): fields the schema does not declare are dropped and their
  paths returned (`spec.trainer.bogus`, `spec.replicatedJobs[0].x`), which is what
  fieldValidation=Strict refuses and Warn reports; `x-kubernetes-preserve-unknown-fields` keeps a
  subtree's unknown fields (its declared ones are still pruned below), and `apiVersion`, `kind`
  and `metadata` stay at the root and at every `x-kubernetes-embedded-resource`. The root
  `metadata` is ObjectMeta (schema/objectmeta/coerce.go): its unknown fields are reported too.
- `drop_nulls` (defaulting/prunenulls.go): a null where the schema is not nullable and has no
  default is removed.
- `default` (defaulting/algorithm.go): each absent property with a `default` gets a copy of it,
  top down, so a defaulted object is defaulted inside as well.
"""

from __future__ import annotations

import copy
from typing import Any

_META = ("apiVersion", "kind", "metadata")
# k8s.io/apimachinery meta/v1 ObjectMeta's JSON fields
OBJECT_META = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields"})


def additional(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schema of a map's values (additionalProperties), or None."""
    extra = (schema or {}).get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def child(schema: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    """The schema of `key` under an object schema: its property, or the map's value schema."""
    if schema is None:
        return None
    props = schema.get("properties")
    if props is not None and key in props:
        return props[key]
    return additional(schema)


def _path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def prune(obj: Any, schema: dict[str, Any], root: bool = True) -> list[str]:
    """Drop undeclared fields from `obj` in place; their paths, sorted (PruneWithOptions)."""
    found: list[str] = []
    if root and isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            for key in [k for k in meta if k not in OBJECT_META]:
                found.append(f"metadata.{key}")
                del meta[key]
    _prune(obj, schema, "", found, embedded=root)
    return sorted(found)


def _prune(value: Any, schema: dict[str, Any] | None, path: str, found: list[str], embedded: bool = False) -> None:
    if schema is not None and schema.get("x-kubernetes-preserve-unknown-fields"):
        _skip_prune(value, schema, path, found)
        return
    embedded = embedded or bool((schema or {}).get("x-kubernetes-embedded-resource"))
    if isinstance(value, dict):
        for key in list(value):
            if embedded and key in _META:
                continue
            sub = child(schema, key)
            if sub is not None:
                _prune(value[key], sub, _path(path, key), found)
            else:
                found.append(_path(path, key))
                del value[key]
    elif isinstance(value, list):
        items = (schema or {}).get("items") if schema is not None else None
        for i, item in enumerate(value):
            _prune(item, items, f"{path}[{i}]", found)


def _skip_prune(value: Any, schema: dict[str, Any], path: str, found: list[str]) -> None:
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    if isinstance(value, dict):
        for key in list(value):
            if embedded and key in _META:
                continue
            sub = child(schema, key)
            if sub is not None:
                _prune(value[key], sub, _path(path, key), found)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _skip_prune(item, schema["items"], f"{path}[{i}]", found)


def drop_nulls(value: Any, schema: dict[str, Any] | None) -> None:
    """PruneNonNullableNullsWithoutDefaults."""
    if isinstance(value, dict):
        for key in list(value):
            sub = child(schema, key)
            if value[key] is None and sub is not None and not sub.get("nullable") and "default" not in sub:
                del value[key]
            else:
                drop_nulls(value[key], sub)
    elif isinstance(value, list):
        items = (schema or {}).get("items")
        for item in value:
            drop_nulls(item, items)


def _defaultable_null(value: Any, schema: dict[str, Any] | None) -> bool:
    return value is None and schema is not None and not schema.get("nullable")


def default(value: Any, schema: dict[str, Any] | None) -> None:
    """Structural defaulting (defaulting.Default), in place."""
    if schema is None:
        return
    if isinstance(value, dict):
        for key, prop in (schema.get("properties") or {}).items():
            if "default" in prop and (key not in value or _defaultable_null(value[key], prop)):
                value[key] = copy.deepcopy(prop["default"])
        for key in value:
            prop = (schema.get("properties") or {}).get(key)
            if prop is not None:
                default(value[key], prop)
            elif additional(schema) is not None:
                extra = additional(schema)
                if _defaultable_null(value[key], extra) and "default" in extra:
                    value[key] = copy.deepcopy(extra["default"])
                default(value[key], extra)
    elif isinstance(value, list):
        items = schema.get("items")
        for i, item in enumerate(value):
            if _defaultable_null(item, items) and "default" in items:
                value[i] = copy.deepcopy(items["default"])
            default(value[i], items)
