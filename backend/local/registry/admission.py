"""Admission for the embedded cluster: upstream defaults and validations, applied before an
object is stored, as the CRDs' OpenAPI defaults, CEL rules and the Trainer's webhooks do.

- TrainJob (trainer v2.3.0 manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml,
  pkg/webhooks/trainjob_webhook.go, pkg/runtime/framework/plugins/jobset/jobset.go):
  runtimeRef.apiGroup defaults to trainer.kubeflow.org and runtimeRef.kind to
  ClusterTrainingRuntime; managedBy defaults to trainer.kubeflow.org/trainjob-controller;
  the name is an RFC 1035 label; runtimeRef and managedBy are immutable; the runtime must
  exist ("unsupported runtime"); each runtimePatches[].manager is a domain-prefixed path.
- The shapes the cockpit's own models check (numNodes >= 1, mount paths...) are the models'
  (backend/models/) and answer 422 Invalid with the field path.
- The kinds' strategies (strategies/) apply them, with what only the cluster knows (the
  runtime there) read from the store.
"""

from __future__ import annotations

import json
import re
from typing import Any

from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError, denied, invalid
from backend.models import ManifestError, parse_resource

TRAINER_GROUP = "trainer.kubeflow.org"
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
_MANAGERS = (MANAGED_BY, "kueue.x-k8s.io/multikueue")
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH_CHARS = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")
WEBHOOK = "validator.trainjob.trainer.kubeflow.org"
LIMITS_WARNING = ("resources.limits.memory is not enforced on the embedded cluster (its pods are processes on "
                  "this machine); requests are, by its scheduler, and each pod's processes are bounded")


def domain_prefixed_path_error(value: str) -> str | None:
    """k8s.io/apimachinery/pkg/util/validation.IsDomainPrefixedPath, as a message or None."""
    domain, slash, path = value.partition("/")
    if not slash or not domain or not path:
        return 'must be a domain-prefixed path (such as "acme.io/foo")'
    if len(domain) > 253 or not _DNS1123_SUBDOMAIN.match(domain):
        return ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character")
    if not _PATH_CHARS.match(path):
        return "Invalid path: must contain only characters [A-Za-z0-9/-._~%!$&'()*+,;=:]"
    return None


def default_trainjob(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    ref = spec.get("runtimeRef")
    if isinstance(ref, dict):
        ref.setdefault("apiGroup", TRAINER_GROUP)
        ref.setdefault("kind", "ClusterTrainingRuntime")
    spec.setdefault("managedBy", MANAGED_BY)


def validate_trainjob(kind: Kind, obj: dict[str, Any], old: dict[str, Any] | None,
                      runtime_exists) -> None:
    name = obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    causes = []
    if len(name) > 63 or not _RFC1035.match(name):
        causes.append(("metadata.name", f'Invalid value: "{name}": a DNS-1035 label must consist of lower case '
                       "alphanumeric characters or '-', start with an alphabetic character, and end with an "
                       "alphanumeric character"))
    if spec.get("managedBy") not in _MANAGERS:
        causes.append(("spec.managedBy", f"Invalid value: {spec.get('managedBy')!r}: ManagedBy must be "
                                         f"{MANAGED_BY} or kueue.x-k8s.io/multikueue"))
    if old is not None:
        for field in ("runtimeRef", "managedBy"):
            if (old.get("spec") or {}).get(field) != spec.get(field):
                causes.append((f"spec.{field}", "Invalid value: field is immutable"))
    if causes:
        raise invalid(kind.kind, name, causes, kind.group)
    ref = spec.get("runtimeRef") or {}
    if not runtime_exists(ref.get("kind"), ref.get("name"), obj["metadata"].get("namespace")):
        # pkg/runtime/core/{cluster,}trainingruntime.go ValidateObjects
        kind_name = ref.get("kind") or ""
        plural = f"{kind_name.lower()}s.{TRAINER_GROUP}"
        which = kind_name[:1].lower() + kind_name[1:]
        raise denied(WEBHOOK, kind.kind, name, f"spec.runtimeRef: Invalid value: {json.dumps(ref, sort_keys=True)}: "
                     f'{plural} "{ref.get("name")}" not found: specified {which} must be created before the '
                     "TrainJob is created", kind.group)
    problems = []
    for patch in spec.get("runtimePatches") or []:
        manager = patch.get("manager", "") if isinstance(patch, dict) else ""
        problem = domain_prefixed_path_error(manager)
        if problem:
            problems.append(f'spec.runtimePatches.manager: Invalid value: "{manager}": {problem}')
    if problems:
        raise denied(WEBHOOK, kind.kind, name, "; ".join(problems), kind.group)


def check_model(kind: Kind, obj: dict[str, Any]) -> Any:
    """The cockpit's typed view of the object, or 422 Invalid naming the field."""
    try:
        return parse_resource(obj, "request")
    except ManifestError as exc:
        text = str(exc).split(": ", 2)[-1]
        field, _, message = text.partition(": ")
        raise invalid(kind.kind, obj["metadata"]["name"], [(field, message or text)], kind.group) from None


def immutable_spec(kind: Kind, obj: dict[str, Any], old: dict[str, Any]) -> None:
    """A job's spec may change only in `suspend` (upstream lets more change while suspended)."""
    def unsuspended(o: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in (o.get("spec") or {}).items() if k != "suspend"}

    if unsuspended(obj) != unsuspended(old):
        raise ApiError(422, "Invalid", f'{kind.kind}.{kind.group} "{obj["metadata"]["name"]}" is invalid: spec: '
                       "Forbidden: the embedded cluster does not change a running job's spec "
                       f"(delete it and apply it again: kubectl delete {kind.singular} {obj['metadata']['name']})")


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
    if group and not _DNS1123_SUBDOMAIN.match(group):
        errors.append((f"{path}.apiGroup", f"Invalid value: \"{group}\": a lowercase RFC 1123 subdomain must "
                                           "consist of lower case alphanumeric characters, '-' or '.'"))
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
