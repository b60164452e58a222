"""Kubeflow Trainer v2.3.0's rules, in one place: its admission webhooks, rule by rule, with
their messages (which the TrainJob and runtime strategies register), and its runtime plugins'
validation and torch policy (which the webhooks and the TrainJob controller use).

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
  both below.
- (Cluster)TrainingRuntime validators (pkg/webhooks/{,cluster}trainingruntime_webhook.go): a
  replicated job labelled with a TrainJob ancestor has replicas 1 and the ancestor's container;
  a TrainingRuntime is checked on create only, a ClusterTrainingRuntime on create and update
  (with the deprecation warning on create).

A rejection is what kube-apiserver returns for a webhook denial: 403 `admission webhook
"validator.trainjob.trainer.kubeflow.org" denied the request: <errors>`.

The custom validation plugins for a TrainJob, and the torch plugin's `numProcPerNode`, computed on
the runtime info: the runtime's JobSet template with the job's runtimePatches merged in
(`merged_runtime_spec`).

- torch (pkg/runtime/framework/plugins/torch/torch.go `Validate`, for a runtime with
  mlPolicy.torch): every envInjection target container exists in its replicated job; the
  trainer's env sets none of torchrun's PET_* variables. (The torchtune checks, for `tune run`
  LLM recipes, are not implemented: the embedded cluster does not run torchtune.)
- jobset (pkg/runtime/framework/plugins/jobset/jobset.go `Validate`): initializer jobs,
  containers and volume mounts for a dataset or model initializer; runtimePatches change only
  while the job is (or becomes) suspended and its JobSet has no active job; each patch's manager
  is a domain-prefixed path (`spec.runtimePatches.manager`, no index, as upstream); patched
  replicated jobs and containers exist; no env for the node and initializer containers.
- `num_proc_per_node` (torch.go `EnforceMLPolicy`): the TrainJob's trainer.numProcPerNode, else
  "auto", which on a node without GPUs becomes the CPU request (else limit) rounded up, at least
  1; with a GPU resource it stays "auto" (torchrun then starts one process per GPU).
"""

from __future__ import annotations

import copy
import math
from typing import Any

from backend.local.registry import fielderrors as fe
from backend.local.registry.fielderrors import FieldError, go_list
from backend.local.registry.merge import strategic_merge
from backend.local.registry.names import domain_prefixed_path
from backend.local.registry.strategy import Lookup
from backend.quantity import quantity

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
    errors = torch(runtime, merged, obj) + jobset(merged, obj, old, lookup)
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


def validate_training_runtime(obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """TrainingRuntimeValidator: on create (its ValidateUpdate returns nothing)."""
    if old is not None:
        return []
    _refuse_replicated_jobs("TrainingRuntime", obj)
    return []


def validate_cluster_training_runtime(obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """ClusterTrainingRuntimeValidator: on create and update; a deprecated one warns on create."""
    warnings = []
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if old is None and labels.get(SUPPORT_LABEL) == DEPRECATED:
        warnings.append(f'ClusterTrainingRuntime "{obj["metadata"]["name"]}" is deprecated and will be removed in a '
                        f"future release of Kubeflow Trainer. See runtime deprecation policy: {DEPRECATION_URL}")
    _refuse_replicated_jobs("ClusterTrainingRuntime", obj)
    return warnings


def _refuse_replicated_jobs(kind: str, obj: dict[str, Any]) -> None:
    errors = _replicated_job_errors(obj)
    if errors:
        raise fe.denied(RUNTIME_VALIDATOR[kind], fe.aggregate(errors))


# (kind, namespace or None, name) → the stored object, or None: what a webhook reads from the cluster

TORCHRUN_ENVS = frozenset({"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"})
NODE, DATASET, MODEL = "node", "dataset-initializer", "model-initializer"
INITIALIZER_VOLUME = "initializer"


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    return ((((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}


def _jobs(merged: dict[str, Any]) -> list[dict[str, Any]]:
    return [j for j in merged.get("replicatedJobs") or [] if isinstance(j, dict)]


def _container_names(merged: dict[str, Any]) -> dict[str, set[str]]:
    return {job.get("name"): {c.get("name") for c in (_pod_spec(job).get("initContainers") or [])
                              + (_pod_spec(job).get("containers") or [])} for job in _jobs(merged)}


def runtime_ref_json(ref: dict[str, Any]) -> fe.GoJSON:
    """A TrainJob's RuntimeRef as json.Marshal writes it."""
    return fe.go_struct({k: v for k, v in ref.items() if v not in (None, "")}, ("name", "apiGroup", "kind"))


# ---------------------------------------------------------------- torch


def torch(runtime: dict[str, Any], merged: dict[str, Any], job: dict[str, Any]) -> list[FieldError]:
    policy = ((runtime.get("spec") or {}).get("mlPolicy") or {})
    if policy.get("torch") is None:
        return []
    errors = []
    names = _container_names(merged)
    for target in ((policy["torch"] or {}).get("envInjection") or {}).get("targets") or []:
        for container in target.get("containerNames") or []:
            if container not in names.get(target.get("jobName"), set()):
                errors.append(fe.invalid_value("spec.runtimeRef", fe.go_struct(target, ("jobName", "containerNames")),
                                               f'envInjection target podSet "{target.get("jobName")}" container '
                                               f'"{container}" not found in runtime template'))
    trainer = (job.get("spec") or {}).get("trainer")
    if trainer is not None:
        env = trainer.get("env") or []
        reserved = sorted({e.get("name") for e in env if isinstance(e, dict)} & TORCHRUN_ENVS)
        if reserved:
            errors.append(fe.invalid_value("spec.trainer.env", fe.go_list(env, ("name", "value", "valueFrom")),
                                           f"must not have reserved envs, invalid envs configured: "
                                           f"[{' '.join(reserved)}]"))
    return errors


def _cpu_per_node(resources: dict[str, Any]) -> int:
    request = quantity((resources.get("requests") or {}).get("cpu"))
    if request:
        return math.ceil(request)
    return math.ceil(quantity((resources.get("limits") or {}).get("cpu")))


def gpus_per_node(resources: dict[str, Any]) -> int:
    """runtime.GetNumGPUPerNode: the first resource whose name holds "gpu", requests before limits."""
    def count(listed: dict[str, Any] | None) -> int:
        for name, value in (listed or {}).items():
            if "gpu" in name.lower():
                return math.ceil(quantity(value))
        return 0
    return count(resources.get("requests")) or count(resources.get("limits"))


def resources_per_node(merged: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The TrainJob's resourcesPerNode, else the runtime's node container's resources
    (ExtractResourcePerNodeFromRuntime)."""
    per_node = ((job.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode")
    if per_node is not None:
        return per_node
    for rjob in _jobs(merged):
        labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if rjob.get("name") == NODE or labels.get(ANCESTOR_LABEL) == "trainer":
            for container in _pod_spec(rjob).get("containers") or []:
                if container.get("name") == NODE and container.get("resources") is not None:
                    return container["resources"]
    return {}


def num_proc_per_node(merged: dict[str, Any], job: dict[str, Any]) -> str:
    """PET_NPROC_PER_NODE as the torch plugin sets it: a number, or "auto" on GPU nodes."""
    value = ((job.get("spec") or {}).get("trainer") or {}).get("numProcPerNode")
    if value is not None:
        return str(value)
    resources = resources_per_node(merged, job)
    if gpus_per_node(resources):
        return "auto"
    return str(max(1, _cpu_per_node(resources)))


# ---------------------------------------------------------------- jobset


def _initializer_errors(which: str, config: str, ref: Any, merged: dict[str, Any],
                        names: dict[str, set[str]]) -> list[FieldError]:
    if which not in names:
        return [fe.invalid_value("spec.runtimeRef", ref, f"must have {which} job when trainJob is configured with "
                                                         f"input {config}")]
    if which not in names[which]:
        return [fe.invalid_value("spec.runtimeRef", ref, f"must have container with name - {which} in the {which} job")]
    for rjob in _jobs(merged):
        if rjob.get("name") != which:
            continue
        for container in _pod_spec(rjob).get("containers") or []:
            if container.get("name") == which and any(m.get("name") == INITIALIZER_VOLUME
                                                      for m in container.get("volumeMounts") or []):
                return []
    return [fe.invalid_value("spec.runtimeRef", ref, f"must have volumeMount with name - {INITIALIZER_VOLUME} in "
                                                     f"container {which} of the {which} job")]


def _immutability_errors(job: dict[str, Any], old: dict[str, Any] | None, lookup: Lookup) -> list[FieldError]:
    """checkRuntimePatchesImmutability."""
    if old is None:
        return []
    spec, old_spec = job.get("spec") or {}, old.get("spec") or {}
    if (spec.get("runtimePatches") or []) == (old_spec.get("runtimePatches") or []):
        return []
    if old_spec.get("suspend") is not True and spec.get("suspend") is not True:
        return [fe.forbidden("spec.runtimePatches", "RuntimePatches can only be modified when the TrainJob is "
                                                    "suspended before or after the update")]
    jobset = lookup("JobSet", job["metadata"].get("namespace"), job["metadata"]["name"]) or {}
    return [fe.forbidden("spec.runtimePatches", f"RuntimePatches cannot be modified when the JobSet's ReplicatedJob "
                                                f"{status.get('name')} is still active")
            for status in (jobset.get("status") or {}).get("replicatedJobsStatus") or [] if status.get("active", 0) > 0]


def jobset(merged: dict[str, Any], job: dict[str, Any], old: dict[str, Any] | None,
           lookup: Lookup) -> list[FieldError]:
    spec = job.get("spec") or {}
    names = _container_names(merged)
    ref = runtime_ref_json(spec.get("runtimeRef") or {})
    initializer = spec.get("initializer") or {}
    errors = []
    if initializer.get("dataset") is not None:
        errors += _initializer_errors(DATASET, "datasetConfig", ref, merged, names)
    if initializer.get("model") is not None:
        errors += _initializer_errors(MODEL, "modelConfig", ref, merged, names)
    errors += _immutability_errors(job, old, lookup)
    patches = spec.get("runtimePatches") or []
    patches_json = fe.GoJSON("[" + ",".join(fe.go_struct(p, ("manager", "time", "trainingRuntimeSpec"))
                                            for p in patches if isinstance(p, dict)) + "]")
    for patch in patches:
        errors += domain_prefixed_path("spec.runtimePatches.manager", (patch or {}).get("manager") or "")
        template = ((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}
        for rjob in (template.get("spec") or {}).get("replicatedJobs") or []:
            containers = names.get(rjob.get("name"))
            if containers is None:
                errors.append(fe.invalid_value("spec.runtimePatches", patches_json, "must not have replicated job that "
                                                                                    "doesn't exist in the runtime job "
                                                                                    "template"))
                continue
            pod = _pod_spec(rjob)
            for container in pod.get("initContainers") or []:
                if container.get("name") not in containers:
                    errors.append(fe.invalid_value("spec.runtimePatches", patches_json, "must not have initContainer "
                                                   f"that doesn't exist in the runtime job {rjob.get('name')}"))
            for container in pod.get("containers") or []:
                if container.get("name") not in containers:
                    errors.append(fe.invalid_value("spec.runtimePatches", patches_json, "must not have container that "
                                                   f"doesn't exist in the runtime job {rjob.get('name')}"))
                elif container.get("env") and container.get("name") in (DATASET, MODEL, NODE):
                    errors.append(fe.invalid_value("spec.runtimePatches", patches_json, f"must not have envs for the "
                                                                                        f"{DATASET}, {MODEL}, {NODE} "
                                                                                        "containers"))
    return errors


def trainjob_num_proc_per_node(trainjob: dict[str, Any], runtime: dict[str, Any]) -> str:
    """PET_NPROC_PER_NODE as the torch plugin sets it for this TrainJob on this runtime."""
    return num_proc_per_node(merged_runtime_spec(runtime, trainjob), trainjob)
