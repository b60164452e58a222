"""Admission for the embedded cluster: what a request must pass before its object is stored.

- The custom resources (TrainJob, TrainingRuntime, ClusterTrainingRuntime, JobSet, RayJob,
  VolumeSnapshot...) are judged as a real cluster with their upstream controllers judges them:
  the CRDs' schemas, CEL rules and the Trainer and JobSet webhooks, by
  backend/local/apiserver/crds (`crds.admit`, the one call; `_lookup` is what it reads from the
  store). Then what only the embedded cluster refuses, each named as its own limit: a job's
  spec changed while it runs, more nodes than pod slots, a job name taken in another namespace,
  a claim or runtime it would need that is not there.
- The cockpit's models (backend/models) give the controller its typed view; they refuse
  nothing upstream admits.
- `admit`, the API's hook, applies them with what only the cluster knows (a job's name taken,
  its claims there, a pod the kubelet could not run) and core/v1 defaults.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from backend.local import barepods, objects
from backend.local.apiserver import crds
from backend.local.apiserver.crds.names import dns1123_subdomain
from backend.local.apiserver.kinds import Kind
from backend.local.apiserver.status import ApiError, conflict, invalid, refused
from backend.local.objects import MAX_PODS
from backend.models import ManifestError, parse_resource

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

LIMITS_WARNING = ("resources.limits are not enforced on the embedded cluster (its pods are plain processes); "
                  "requests are, by its scheduler")
# Kinds only the controllers create: a client's Pod or JobSet would never run, so it is refused.
_RUN_BY_CONTROLLERS = ("JobSet", "Node")

# Kinds the controller acts on: parsed by the cockpit's models before they are stored.
MODELLED = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "PersistentVolumeClaim", "VolumeSnapshot",
            "RayJob")


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


def too_many_nodes(kind: Kind, obj: dict[str, Any]) -> None:
    """Not an upstream rule: a cluster would keep such pods Pending; one machine cannot hold that
    many Pending pods either, so the embedded cluster says so at once."""
    num_nodes = (((obj.get("spec") or {}).get("trainer")) or {}).get("numNodes")
    if isinstance(num_nodes, int) and num_nodes > MAX_PODS:
        raise invalid(kind.kind, obj["metadata"]["name"], [(
            "spec.trainer.numNodes", f"Invalid value: {num_nodes}: the embedded cluster is one node with {MAX_PODS} "
            f"pod slots (the kubelet's maxPods), so at most {MAX_PODS} nodes can ever be scheduled; use a real "
            "cluster for more")], kind.group)


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


def admit(api: ClusterApi, kind: Kind, operation: str, obj: dict[str, Any],
          old: dict[str, Any] | None) -> list[str]:
    """The API's admission (`Hooks.admit`): default and validate `obj` in place, upstream's rules
    first, then the cluster's own (jobs' names, claims); returns warnings."""
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
    warnings = crds.admit(kind.kind, operation, obj, old, lambda k, ns, n: _lookup(api, k, ns, n))
    if kind.kind == "Pod" and operation == "CREATE":
        _default_pod(kind, obj)
        if any((c.get("resources") or {}).get("limits") for c in obj["spec"].get("containers") or []):
            warnings.append(LIMITS_WARNING)
    if kind.kind == "Secret":  # stringData is write-only: merged into data (core/v1 Secret)
        obj["type"] = obj.get("type") or "Opaque"
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(str(value).encode()).decode()
    if kind.kind not in MODELLED:
        return warnings
    if kind.kind == "TrainJob":
        too_many_nodes(kind, obj)
    if old is not None and kind.kind in ("TrainJob", "RayJob"):
        immutable_spec(kind, obj, old)
    resource = check_model(kind, obj)
    # A RayJob KubeRay's validation refuses is stored and never runs (api.py marks it
    # ValidationFailed): what this cluster needs to run a job does not apply to it.
    runs = not (kind.kind == "RayJob" and crds.validate_rayjob(obj))
    if operation == "CREATE" and kind.kind in ("TrainJob", "RayJob") and runs:
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


def _lookup(api: ClusterApi, kind_name: str, namespace: str | None, name: str) -> dict[str, Any] | None:
    """What a webhook reads from the cluster: the stored object, or None."""
    kind = api.kinds.get(kind_name)
    if kind is None:
        return None
    return api.store.find(kind, namespace if kind.namespaced else None, name)
