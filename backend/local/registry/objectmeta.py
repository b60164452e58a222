"""Every object's metadata checked as k8s.io/apimachinery's api/validation/objectmeta.go checks it
(ValidateObjectMetaAccessor on create, ValidateObjectMetaAccessorUpdate on update), with the
messages of its field errors (fielderrors.py) and name rules (names.py):

- the name by the kind's rule (its strategy's `name_problems`: an RFC 1123 subdomain for most,
  a label for a Namespace), a namespaced object's namespace an RFC 1123 label;
- labels: qualified-name keys, values of at most 63 characters as IsValidLabelValue says;
- annotations: qualified-name keys (case aside), at most 256 KiB in all;
- ownerReferences complete (apiVersion, kind, name, uid), one controller at most, no Event;
- finalizers qualified names, not both orphan and foregroundDeletion;
- generation not negative; managedFields entries of operation Apply or Update, type FieldsV1,
  a printable manager of at most 128 bytes (meta/v1/validation ValidateManagedFields);
- on update: name, namespace and uid never change (`field is immutable`).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from backend.local.registry import fielderrors as fe
from backend.local.registry import names
from backend.local.registry.fielderrors import FieldError
from backend.local.registry.kinds import Kind

ANNOTATIONS_LIMIT = 256 * (1 << 10)  # TotalAnnotationSizeLimitB
FIELD_MANAGER_LIMIT = 128  # FieldManagerMaxLength
NameRule = Callable[[str], list[str]]


def qualified_kind(kind: Kind) -> str:
    return f"{kind.kind}.{kind.group}" if kind.group else kind.kind


def _labels(labels: Any, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [fe.invalid_value(path, labels, "must be a map of strings")]
    errors = []
    for key, value in labels.items():
        errors += [fe.invalid_value(path, key, problem) for problem in names.qualified_name(key)]
        if not isinstance(value, str):
            errors.append(fe.invalid_value(path, value, "must be a string"))
        else:
            errors += [fe.invalid_value(path, value, problem) for problem in names.label_value(value)]
    return errors


def _annotations(annotations: Any, path: str) -> list[FieldError]:
    if annotations is None:
        return []
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        return [fe.invalid_value(path, annotations, "must be a map of strings")]
    errors = [fe.invalid_value(path, key, problem)
              for key in annotations for problem in names.qualified_name(key.lower())]
    if sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()) > ANNOTATIONS_LIMIT:
        errors.append(fe.too_long(path, ANNOTATIONS_LIMIT))
    return errors


def _owner_references(refs: Any, path: str) -> list[FieldError]:
    if refs is None:
        return []
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        return [fe.invalid_value(path, refs, "must be a list of owner references")]
    errors: list[FieldError] = []
    controller = ""
    for ref in refs:
        api_version = str(ref.get("apiVersion") or "")
        if not api_version.rpartition("/")[2]:
            errors.append(fe.invalid_value(f"{path}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errors.append(fe.invalid_value(f"{path}.{key}", str(ref.get(key) or ""), "must not be empty"))
        if (api_version, ref.get("kind")) == ("v1", "Event"):
            errors.append(fe.invalid_value(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{ref.get('kind')}/{ref.get('name')}"
            if controller:
                errors.append(fe.invalid_value(path, refs, "Only one reference can have Controller set to true. "
                                                           f'Found "true" in references for {controller} and '
                                                           f"{current}"))
            controller = controller or current
    return errors


def _finalizers(finalizers: Any, path: str) -> list[FieldError]:
    if finalizers is None:
        return []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        return [fe.invalid_value(path, finalizers, "must be a list of strings")]
    errors = [fe.invalid_value(path, f, problem) for f in finalizers for problem in names.qualified_name(f)]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errors.append(fe.invalid_value(path, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"))
    return errors


def field_manager(manager: str, path: str) -> list[FieldError]:
    """ValidateFieldManager."""
    errors = [fe.too_long(path, FIELD_MANAGER_LIMIT)] if len(manager.encode()) > FIELD_MANAGER_LIMIT else []
    for i, char in enumerate(manager):
        if not char.isprintable():
            errors.append(fe.invalid_value(path, manager, f"invalid character {json.dumps(char)[1:-1]} "
                                                          f"(at position {i})"))
    return errors


def _managed_fields(entries: Any, path: str) -> list[FieldError]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        return [fe.invalid_value(path, entries, "must be a list of managed fields entries")]
    errors: list[FieldError] = []
    for i, entry in enumerate(entries):
        here = f"{path}[{i}]"
        if not isinstance(entry, dict):
            errors.append(fe.invalid_value(here, entry, "must be a managed fields entry"))
            continue
        if entry.get("operation") not in ("Apply", "Update"):
            errors.append(fe.invalid_value(f"{here}.operation", entry.get("operation") or "",
                                           "must be `Apply` or `Update`"))
        if entry.get("fieldsType") and entry["fieldsType"] != "FieldsV1":
            errors.append(fe.invalid_value(f"{here}.fieldsType", entry["fieldsType"], "must be `FieldsV1`"))
        errors += field_manager(str(entry.get("manager") or ""), f"{here}.manager")
    return errors


def _common(kind: Kind, meta: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    if kind.namespaced:
        namespace = meta.get("namespace") or ""
        if not namespace:
            errors.append(fe.required("metadata.namespace"))
        errors += [fe.invalid_value("metadata.namespace", namespace, p) for p in names.dns1123_label(namespace)
                   if namespace]
    elif meta.get("namespace"):
        errors.append(fe.forbidden("metadata.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errors.append(fe.invalid_value("metadata.generation", generation, "must be greater than or equal to 0"))
    errors += _labels(meta.get("labels"), "metadata.labels")
    errors += _annotations(meta.get("annotations"), "metadata.annotations")
    errors += _owner_references(meta.get("ownerReferences"), "metadata.ownerReferences")
    errors += _finalizers(meta.get("finalizers"), "metadata.finalizers")
    errors += _managed_fields(meta.get("managedFields"), "metadata.managedFields")
    return errors


def _name(meta: dict[str, Any], rule: NameRule) -> list[FieldError]:
    name = meta.get("name")
    if not name:
        return [fe.required("metadata.name", "name or generateName is required")]
    if not isinstance(name, str):
        return [fe.invalid_value("metadata.name", name, "must be a string")]
    return [fe.invalid_value("metadata.name", name, problem) for problem in rule(name)]


def check_create(kind: Kind, obj: dict[str, Any], rule: NameRule) -> None:
    meta = obj.get("metadata") or {}
    errors = _name(meta, rule) + _common(kind, meta)
    if errors:
        raise fe.invalid(qualified_kind(kind), str(meta.get("name") or ""), errors)


def check_update(kind: Kind, obj: dict[str, Any], old: dict[str, Any], rule: NameRule) -> None:
    meta, old_meta = obj.get("metadata") or {}, old["metadata"]
    errors = _name(meta, rule) + _common(kind, meta)
    for key in ("name", "namespace", "uid"):
        if (meta.get(key) or "") != (old_meta.get(key) or ""):
            errors.append(fe.invalid_value(f"metadata.{key}", meta.get(key) or "", "field is immutable"))
    if errors:
        raise fe.invalid(qualified_kind(kind), str(meta.get("name") or ""), errors)

