"""Kubeflow Trainer v2.3.0's admission webhooks, rule by rule, with their messages.

- TrainJob defaulter (pkg/webhooks/trainjob_webhook.go `Default`, on create and update): each
  runtimePatches[] entry gets `time`, now on create; on update a patch of the same manager keeps
  its old time when nothing else changed, and gets now when it did.
- TrainJob validator (`ValidateCreate`/`ValidateUpdate`): the runtimeRef's `Kind.apiGroup` must
  be a registered runtime ("unsupported runtime: ..."); the runtime must exist
  (pkg/runtime/core/{,cluster}trainingruntime.go `ValidateObjects`: "<err>: specified
  trainingRuntime must be created before the TrainJob is created", at `spec.RuntimeRef` for a
  ClusterTrainingRuntime, as upstream spells it); a deprecated ClusterTrainingRuntime warns; then
  the custom validation plugins run on the runtime info (the runtime's JobSet template with the
  TrainJob's runtimePatches merged in, as `newRuntimeInfo` merges them): the torch plugin
  (plugins/torch/torch.go `Validate`) and the jobset plugin (plugins/jobset/jobset.go `Validate`),
  both in trainer_plugins.py.
- (Cluster)TrainingRuntime validators (pkg/webhooks/{,cluster}trainingruntime_webhook.go): a
  replicated job labelled with a TrainJob ancestor has replicas 1 and the ancestor's container;
  a TrainingRuntime is checked on create only, a ClusterTrainingRuntime on create and update
  (with the deprecation warning on create).

A rejection is what kube-apiserver returns for a webhook denial: 403 `admission webhook
"validator.trainjob.trainer.kubeflow.org" denied the request: <errors>`.
"""

from __future__ import annotations

import copy
from typing import Any

from backend.local.registry.crds import fielderrors as fe
from backend.local.registry.crds import trainer_plugins
from backend.local.registry.crds.fielderrors import FieldError, go_list
from backend.local.registry.crds.trainer_plugins import Lookup, runtime_ref_json
from backend.local.registry.merge import strategic_merge

GROUP = "trainer.kubeflow.org"
TRAINJOB_VALIDATOR = "validator.trainjob.trainer.kubeflow.org"
RUNTIME_VALIDATOR = {"TrainingRuntime": "validator.trainingruntime.trainer.kubeflow.org",
                     "ClusterTrainingRuntime": "validator.clustertrainingruntime.trainer.kubeflow.org"}
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
# ancestor label value → the container its replicated job must have (trainingruntime_webhook.go)
ANCESTOR_CONTAINERS = {"trainer": "node", "model-initializer": "model-initializer",
                       "dataset-initializer": "dataset-initializer"}
SUPPORT_LABEL, DEPRECATED = "trainer.kubeflow.org/support", "deprecated"
DEPRECATION_URL = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
_CONTAINER_FIELDS = ("name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
                     "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts", "volumeDevices",
                     "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
                     "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty")

# ---------------------------------------------------------------- TrainJob defaulter


def default_trainjob(obj: dict[str, Any], old: dict[str, Any] | None, now: str) -> None:
    """TrainJobDefaulter.Default: runtimePatches[].time (`now` as RFC 3339, e.g. 2026-01-02T03:04:05Z)."""
    patches = (obj.get("spec") or {}).get("runtimePatches") or []
    if old is None:
        for patch in patches:
            if isinstance(patch, dict) and not patch.get("time"):
                patch["time"] = now
        return
    before = {p.get("manager"): p for p in (old.get("spec") or {}).get("runtimePatches") or [] if isinstance(p, dict)}
    for patch in patches:
        if not isinstance(patch, dict):
            continue
        previous = before.get(patch.get("manager"))
        if previous is not None:
            same = {k: v for k, v in previous.items() if k != "time"} == {k: v for k, v in patch.items() if k != "time"}
            if same and previous.get("time"):
                patch["time"] = previous["time"]
            else:
                patch["time"] = now
        elif not patch.get("time"):
            patch["time"] = now


# ---------------------------------------------------------------- TrainJob validator


def merged_runtime_spec(runtime: dict[str, Any], trainjob: dict[str, Any]) -> dict[str, Any]:
    """The runtime's JobSet spec with the TrainJob's runtimePatches merged in order (strategic
    merge: replicated jobs and containers by name), replicated jobs kept in the runtime's order
    (TrainingRuntime.mergeRuntimePatches)."""
    spec = copy.deepcopy((((runtime.get("spec") or {}).get("template") or {}).get("spec")) or {})
    order = {job.get("name"): i for i, job in enumerate(spec.get("replicatedJobs") or [])}
    for patch in (trainjob.get("spec") or {}).get("runtimePatches") or []:
        template = ((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}
        if template.get("spec") is not None:
            spec = strategic_merge(spec, template["spec"])
    if spec.get("replicatedJobs"):
        spec["replicatedJobs"].sort(key=lambda job: order.get(job.get("name"), len(order)))
    return spec


def runtime_key(ref: dict[str, Any]) -> str:
    """RuntimeRefToRuntimeRegistryKey: schema.GroupKind{Group, Kind}.String()."""
    group, kind = ref.get("apiGroup") or "", ref.get("kind") or ""
    return f"{kind}.{group}" if group else kind


def validate_trainjob(obj: dict[str, Any], old: dict[str, Any] | None, lookup: Lookup) -> list[str]:
    """TrainJobValidator.ValidateCreate/ValidateUpdate: warnings, or ApiError (the webhook's denial)."""
    spec = obj.get("spec") or {}
    ref = spec.get("runtimeRef") or {}
    key = runtime_key(ref)
    if key not in (f"TrainingRuntime.{GROUP}", f"ClusterTrainingRuntime.{GROUP}"):
        raise fe.denied(TRAINJOB_VALIDATOR, f"unsupported runtime: {key}")
    cluster = ref.get("kind") == "ClusterTrainingRuntime"
    namespace = None if cluster else obj["metadata"].get("namespace")
    runtime = lookup(ref["kind"], namespace, ref.get("name") or "")
    if runtime is None:
        plural = "clustertrainingruntimes" if cluster else "trainingruntimes"
        which = "clusterTrainingRuntime" if cluster else "trainingRuntime"
        error = fe.invalid_value("spec.RuntimeRef" if cluster else "spec.runtimeRef", runtime_ref_json(ref),
                                 f'{plural}.{GROUP} "{ref.get("name")}" not found: specified {which} must be '
                                 "created before the TrainJob is created")
        raise fe.denied(TRAINJOB_VALIDATOR, fe.aggregate([error]))
    warnings = []
    if cluster and ((runtime.get("metadata") or {}).get("labels") or {}).get(SUPPORT_LABEL) == DEPRECATED:
        warnings.append(f'Referenced ClusterTrainingRuntime "{runtime["metadata"]["name"]}" is deprecated and will '
                        "be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: "
                        f"{DEPRECATION_URL}")
    merged = merged_runtime_spec(runtime, obj)
    errors = trainer_plugins.torch(runtime, merged, obj) + trainer_plugins.jobset(merged, obj, old, lookup)
    if errors:
        raise fe.denied(TRAINJOB_VALIDATOR, fe.aggregate(errors))
    return warnings


# ---------------------------------------------------------------- (Cluster)TrainingRuntime validators


def _replicated_job_errors(runtime: dict[str, Any]) -> list[FieldError]:
    """validateReplicatedJobs."""
    errors = []
    jobs = ((((runtime.get("spec") or {}).get("template") or {}).get("spec")) or {}).get("replicatedJobs") or []
    for i, job in enumerate(jobs):
        labels = ((job.get("template") or {}).get("metadata") or {}).get("labels")
        ancestor = (labels or {}).get(ANCESTOR_LABEL)
        if ancestor not in ANCESTOR_CONTAINERS:
            continue
        path = f"spec.template.spec.replicatedJobs[{i}]"
        if job.get("replicas", 1) != 1:
            errors.append(fe.invalid_value(f"{path}.replicas", job.get("replicas"), "always must be 1"))
        pod = ((((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
        containers = pod.get("containers") or []
        if not any(c.get("name") == ANCESTOR_CONTAINERS[ancestor] for c in containers):
            errors.append(fe.invalid_value(f"{path}.template.spec.template.spec.containers",
                                           go_list(containers, _CONTAINER_FIELDS, {"resources": {}}),
                                           f"must contain the required container for the ancestor: {ancestor}"))
    return errors


def validate_runtime(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """TrainingRuntimeValidator / ClusterTrainingRuntimeValidator: warnings, or ApiError."""
    if kind == "TrainingRuntime" and old is not None:
        return []  # ValidateUpdate returns nothing
    warnings = []
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if kind == "ClusterTrainingRuntime" and old is None and labels.get(SUPPORT_LABEL) == DEPRECATED:
        warnings.append(f'ClusterTrainingRuntime "{obj["metadata"]["name"]}" is deprecated and will be removed in a '
                        f"future release of Kubeflow Trainer. See runtime deprecation policy: {DEPRECATION_URL}")
    errors = _replicated_job_errors(obj)
    if errors:
        raise fe.denied(RUNTIME_VALIDATOR[kind], fe.aggregate(errors))
    return warnings


def check(kind: str, obj: dict[str, Any], old: dict[str, Any] | None, lookup: Lookup) -> list[str]:
    if kind == "TrainJob":
        return validate_trainjob(obj, old, lookup)
    return validate_runtime(kind, obj, old)


