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
- `admit`, the API's hook, applies them with what only the cluster knows (a job's name taken,
  its claims and runtime there, a pod the kubelet could not run) and core/v1 defaults.
"""

from __future__ import annotations

import base64
import json
import re
from functools import partial
from typing import TYPE_CHECKING, Any

from backend.local import barepods, objects
from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError, conflict, denied, invalid, refused
from backend.models import ManifestError, parse_resource

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

TRAINER_GROUP = "trainer.kubeflow.org"
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
_MANAGERS = (MANAGED_BY, "kueue.x-k8s.io/multikueue")
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH_CHARS = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")
WEBHOOK = "validator.trainjob.trainer.kubeflow.org"
LIMITS_WARNING = ("resources.limits.memory is not enforced on the embedded cluster (its pods are processes on "
                  "this machine); requests are, by its scheduler, and each pod's processes are bounded")
# Kinds only the controllers create: a client's Pod or JobSet would never run, so it is refused.
_RUN_BY_CONTROLLERS = ("JobSet", "Node")

# Kinds the controller acts on: parsed by the cockpit's models before they are stored.
MODELLED = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "PersistentVolumeClaim", "VolumeSnapshot",
            "RayJob")


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


def admit(api: ClusterApi, kind: Kind, operation: str, obj: dict[str, Any],
          old: dict[str, Any] | None) -> list[str]:
    """The API's admission (`Hooks.admit`): default and validate `obj` in place, against the
    rules above and what the cluster holds (jobs' names, claims, runtimes); returns warnings."""
    if operation == "CREATE" and kind.kind in _RUN_BY_CONTROLLERS:
        raise refused(f"the embedded cluster creates {kind.plural} itself (for TrainJobs and RayJobs) and does not "
                      f"run {kind.plural} created through the API: apply a TrainJob instead")
    if kind.kind == "Namespace" and operation == "CREATE":
        obj.setdefault("status", {"phase": "Active"})
    if kind.kind == "VolumeSnapshotContent" and operation == "CREATE":
        raise refused("the embedded cluster makes a VolumeSnapshotContent for each VolumeSnapshot it takes; "
                      "pre-provisioned snapshot contents are not supported: create a VolumeSnapshot instead")
    if kind.kind == "PersistentVolumeClaim" and operation == "CREATE":
        normalize_data_sources(obj.setdefault("spec", {}))
        validate_claim_data_source(kind, obj)
    warnings = []
    if kind.kind == "Pod" and operation == "CREATE":
        _default_pod(kind, obj)
        if any((c.get("resources") or {}).get("limits") for c in obj["spec"].get("containers") or []):
            warnings.append(LIMITS_WARNING)
    if kind.kind == "Secret":  # stringData is write-only: merged into data (core/v1 Secret)
        obj["type"] = obj.get("type") or "Opaque"
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(str(value).encode()).decode()
    if kind.kind == "TrainJob":
        default_trainjob(obj)
        validate_trainjob(kind, obj, old, partial(_runtime_exists, api))
    if kind.kind not in MODELLED:
        return warnings
    if old is not None and kind.kind in ("TrainJob", "RayJob"):
        immutable_spec(kind, obj, old)
    if old is not None and kind.kind == "VolumeSnapshot" and obj.get("spec") != old.get("spec"):
        raise invalid(kind.kind, obj["metadata"]["name"], [("spec.source", "Invalid value: field is immutable")],
                      kind.group)
    resource = check_model(kind, obj)
    if operation == "CREATE" and kind.kind in ("TrainJob", "RayJob"):
        name = obj["metadata"]["name"]
        # The same job again is the store's AlreadyExists (what `apply` expects), not this.
        taken = name in api.ctl.runners and api.store.find(kind, obj["metadata"]["namespace"], name) is None
        if taken:
            raise conflict(kind.plural, name, f"a {api.ctl.runners[name].kind} of that name exists (jobs share "
                           "one set of names across namespaces on the embedded cluster)", kind.group)
        api.ctl.check_job(resource)
        for claim, _ in resource.volume_mounts():
            if api.store.find(api.kinds["PersistentVolumeClaim"], obj["metadata"]["namespace"], claim) is None:
                raise invalid(kind.kind, name, [("spec", f"PersistentVolumeClaim {claim!r} not found: apply it "
                                                 "first (kubectl apply -f manifests/volume.yaml)")], kind.group)
    if kind.kind == "TrainJob" and (((obj.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode")
                                    or {}).get("limits"):
        warnings.append(LIMITS_WARNING)
    if operation == "CREATE" and kind.kind == "VolumeSnapshot":
        claim = resource.spec.source.persistent_volume_claim_name
        if api.store.find(api.kinds["PersistentVolumeClaim"], obj["metadata"]["namespace"], claim) is None:
            raise invalid(kind.kind, obj["metadata"]["name"],
                          [("spec.source.persistentVolumeClaimName",
                            f"Not found: volume {claim!r} not found (apply its PersistentVolumeClaim first)")],
                          kind.group)
    return warnings


def _default_pod(kind: Kind, obj: dict[str, Any]) -> None:
    """core/v1 defaults of a pod a client creates, and what the embedded kubelet cannot run."""
    problems = barepods.check_spec(obj)
    if problems:
        raise invalid(kind.kind, obj["metadata"]["name"], problems, kind.group)
    spec = obj.setdefault("spec", {})
    for key, value in (("restartPolicy", "Always"), ("terminationGracePeriodSeconds", 30),
                       ("schedulerName", "default-scheduler"), ("serviceAccountName", "default"),
                       ("dnsPolicy", "ClusterFirst")):
        spec.setdefault(key, value)
    obj["status"] = {"phase": "Pending", "qosClass": objects.qos(spec)}


def _runtime_exists(api: ClusterApi, kind_name: str, name: str, namespace: str | None) -> bool:
    kind = api.kinds.get(kind_name or "")
    if kind is None or kind.kind not in ("TrainingRuntime", "ClusterTrainingRuntime"):
        return False
    return api.store.find(kind, namespace if kind.namespaced else None, name or "") is not None
