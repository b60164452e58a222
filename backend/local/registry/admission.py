"""Admission rules of the embedded cluster that its kinds' strategies (strategies/) apply, beside
the custom resources' upstream admission (crds/: their CRDs' schemas, CEL rules and the Trainer,
JobSet and KubeRay webhooks and validation, which the generic registry runs for every kind that
has a CRD):

- the cockpit's models (backend/models) give the controllers their typed view; they refuse
  nothing upstream admits, and answer 422 Invalid with the field path;
- a running job's spec does not change here (suspend it first);
- a PersistentVolumeClaim's data sources as the API server normalizes and checks them.
"""

from __future__ import annotations

from typing import Any

from backend.local.registry.names import dns1123_subdomain
from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError, invalid
from backend.models import ManifestError, parse_resource

def check_model(kind: Kind, obj: dict[str, Any]) -> Any:
    """The cockpit's typed view of the object, or 422 Invalid naming the field."""
    try:
        return parse_resource(obj, "request")
    except ManifestError as exc:
        text = str(exc).split(": ", 2)[-1]
        field, _, message = text.partition(": ")
        raise invalid(kind.kind, obj["metadata"]["name"], [(field, message or text)], kind.group) from None


def immutable_spec(kind: Kind, obj: dict[str, Any], old: dict[str, Any]) -> None:
    """A running job's spec does not change here (upstream lets more change: a RayJob's spec,
    a suspended TrainJob's runtimePatches); while the job is suspended, before or after, it may."""
    def unsuspended(o: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in (o.get("spec") or {}).items() if k != "suspend"}

    if any((o.get("spec") or {}).get("suspend") for o in (obj, old)) or unsuspended(obj) == unsuspended(old):
        return
    raise ApiError(422, "Invalid", f'{kind.kind}.{kind.group} "{obj["metadata"]["name"]}" is invalid: spec: '
                   "Forbidden: the embedded cluster does not change a running job's spec "
                   f"(suspend it first, or delete it and apply it again: kubectl delete {kind.singular} "
                   f"{obj['metadata']['name']})")


# ---------------------------------------------------------------- PersistentVolumeClaim data sources


def normalize_data_sources(spec: dict[str, Any]) -> None:
    """kubernetes pkg/api/persistentvolumeclaim/util.go NormalizeDataSources (AnyVolumeDataSource
    is GA): on create, whichever of dataSource / dataSourceRef is set is copied to the other."""
    source, ref = spec.get("dataSource"), spec.get("dataSourceRef")
    if source and not ref:
        spec["dataSourceRef"] = dict(source)
    elif ref and not source and not ref.get("namespace"):
        spec["dataSource"] = {k: v for k, v in ref.items() if k != "namespace"}


def _reference_errors(ref: Any, path: str) -> list[tuple[str, str]]:
    """pkg/apis/core/validation validateDataSource / validateDataSourceRef."""
    if not isinstance(ref, dict):
        return [(path, "Invalid value: must be an object")]
    errors = []
    if not ref.get("name"):
        errors.append((f"{path}.name", "Required value"))
    if not ref.get("kind"):
        errors.append((f"{path}.kind", "Required value"))
    group = ref.get("apiGroup") or ""
    if not group and ref.get("kind") != "PersistentVolumeClaim":
        errors.append((path, f"Invalid value: \"{ref.get('kind', '')}\": must be 'PersistentVolumeClaim' when "
                             "referencing the default apiGroup"))
    if group:
        errors += [(f"{path}.apiGroup", f'Invalid value: "{group}": {problem}') for problem in dns1123_subdomain(group)]
    return errors


def validate_claim_data_source(kind: Kind, obj: dict[str, Any]) -> None:
    """ValidatePersistentVolumeClaimSpec's data source rules: each reference well formed, and
    dataSource equal to dataSourceRef when both are given. A dataSourceRef.namespace needs the
    alpha CrossNamespaceVolumeDataSource gate (and a ReferenceGrant), which this cluster has not:
    refused rather than dropped silently as the gate-off API server does."""
    spec = obj.get("spec") or {}
    source, ref = spec.get("dataSource"), spec.get("dataSourceRef")
    errors = []
    if source is not None:
        errors += _reference_errors(source, "spec.dataSource")
    if ref is not None:
        errors += _reference_errors(ref, "spec.dataSourceRef")
        if isinstance(ref, dict) and ref.get("namespace"):
            errors.append(("spec.dataSourceRef.namespace", "Forbidden: cross-namespace data sources "
                                                           "(CrossNamespaceVolumeDataSource) are not enabled"))
    if not errors and source and ref and (
            (source.get("apiGroup") or "", source.get("kind"), source.get("name"))
            != (ref.get("apiGroup") or "", ref.get("kind"), ref.get("name"))):
        errors.append(("spec", "Invalid value: \"spec.dataSource\": must match dataSourceRef"))
    if errors:
        raise invalid(kind.kind, obj["metadata"]["name"], errors, kind.group)
