"""Pydantic types shared by every part: resources as declared (Kubernetes/Kubeflow shapes) and
what the cockpit observes (pods, log lines, checkpoints, snapshots, checks, evidence).

Declared resources keep the upstream field names (camelCase, via aliases) and keep unknown fields
(`extra="allow"`), so one YAML file applies unchanged to the embedded cluster and to Kubernetes.
Only the fields the cockpit acts on are typed and validated here; the full upstream schema is
checked in tests against the `kubeflow_trainer_api` models.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from backend.errors import ManifestError  # noqa: F401 (re-exported: callers import it from here)
from training.logfmt import step_and_loss

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
SNAPSHOT_API = "snapshot.storage.k8s.io/v1"
RAY_API = "ray.io/v1"  # KubeRay's RayJob
DEFAULT_RUNTIME = "kfcockpit-torch"
# Container name of the trainer in the Trainer's torch runtimes; patches and mounts target it.
TRAINER_CONTAINER = "node"
# Labels every pod carries, on both platforms (the same keys Kubeflow Trainer/JobSet set).
LABEL_JOB = "jobset.sigs.k8s.io/jobset-name"
LABEL_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
LABEL_RANK = "batch.kubernetes.io/job-completion-index"
# Pod.rank of a pod that has no rank: a RayJob's driver (its LABEL_RANK is "driver").
DRIVER_RANK = -1
# What KubeRay v1.7.0 puts on the pods of a RayJob (ray-operator/controllers/ray/utils/constant.go).
# The Ray cluster's pods (common/pod.go labelPod) carry the cluster, node type and group; the
# RayCluster's own ray.io/originated-from-* labels do not reach them. Only the submitter Job's pod
# (rayjob_controller.go getSubmitterTemplate) names the RayJob.
RAY_LABEL_CLUSTER = "ray.io/cluster"
RAY_LABEL_NODE_TYPE = "ray.io/node-type"  # "head" or "worker"
RAY_LABEL_GROUP = "ray.io/group"  # "headgroup" on the head, else the worker group's name
RAY_LABEL_ORIGINATED_NAME = "ray.io/originated-from-cr-name"  # the RayJob's name (submitter pod)
RAY_LABEL_ORIGINATED_CRD = "ray.io/originated-from-crd"  # "RayJob"
# Only with the RayMultihostIndexing feature gate (common/pod.go DefaultWorkerPodTemplate).
RAY_LABEL_REPLICA_INDEX = "ray.io/worker-group-replica-index"

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class _Kube(BaseModel):
    """Upstream Kubernetes shape: camelCase aliases, unknown fields kept and round-tripped."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")

    def to_manifest(self) -> dict[str, Any]:
        """The upstream JSON shape, without unset (None or empty) fields."""
        return _prune(self.model_dump(by_alias=True, exclude_none=True, mode="json"))


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def check_name(name: str, what: str = "name") -> str:
    """A Kubernetes object name (RFC 1123 label, at most 63 characters)."""
    if len(name) > 63 or not _DNS1123.match(name):
        raise ValueError(
            f"{what} {name!r} is not a valid name: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return name


class ObjectMeta(_Kube):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        return check_name(v, "metadata.name")


# ---------------------------------------------------------------- core/v1 pieces used in patches


class EnvVar(_Kube):
    name: str
    value: str | None = None


class ResourceRequirements(_Kube):
    requests: dict[str, str | int | float] = Field(default_factory=dict)
    limits: dict[str, str | int | float] = Field(default_factory=dict)


class VolumeMount(_Kube):
    name: str
    mount_path: str = Field(alias="mountPath")
    read_only: bool | None = Field(default=None, alias="readOnly")

    @field_validator("mount_path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"mountPath {v!r} must be an absolute path")
        return v


class PVCSource(_Kube):
    claim_name: str = Field(alias="claimName")


class PodVolume(_Kube):
    name: str
    persistent_volume_claim: PVCSource | None = Field(default=None, alias="persistentVolumeClaim")


# ---------------------------------------------------------------- Kubeflow Trainer: TrainJob


class RuntimeRef(_Kube):
    name: str
    kind: str = "ClusterTrainingRuntime"  # the TrainJob CRD's default (trainer v2.3.0)
    api_group: str = Field(default="trainer.kubeflow.org", alias="apiGroup")


class Trainer(_Kube):
    image: str | None = None
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    num_nodes: int | None = Field(default=None, alias="numNodes")
    num_proc_per_node: int | None = Field(default=None, alias="numProcPerNode")
    resources_per_node: ResourceRequirements | None = Field(default=None, alias="resourcesPerNode")

    @field_validator("num_nodes", "num_proc_per_node")
    @classmethod
    def _positive(cls, v: int | None, info) -> int | None:
        if v is not None and v < 1:
            name = {"num_nodes": "numNodes", "num_proc_per_node": "numProcPerNode"}[info.field_name]
            raise ValueError(f"{name} must be at least 1, got {v}")
        return v


class ContainerPatch(_Kube):
    name: str
    env: list[EnvVar] = Field(default_factory=list)
    volume_mounts: list[VolumeMount] = Field(default_factory=list, alias="volumeMounts")


class PodSpecPatch(_Kube):
    volumes: list[PodVolume] = Field(default_factory=list)
    containers: list[ContainerPatch] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")


class PodTemplatePatch(_Kube):
    spec: PodSpecPatch | None = None


class JobSpecPatch(_Kube):
    template: PodTemplatePatch | None = None


class JobTemplatePatch(_Kube):
    spec: JobSpecPatch | None = None


class ReplicatedJobPatch(_Kube):
    name: str
    template: JobTemplatePatch | None = None


class JobSetSpecPatch(_Kube):
    replicated_jobs: list[ReplicatedJobPatch] = Field(default_factory=list, alias="replicatedJobs")


class JobSetTemplatePatch(_Kube):
    spec: JobSetSpecPatch | None = None


class TrainingRuntimeSpecPatch(_Kube):
    template: JobSetTemplatePatch | None = None


class RuntimePatch(_Kube):
    manager: str
    training_runtime_spec: TrainingRuntimeSpecPatch | None = Field(default=None, alias="trainingRuntimeSpec")


class TrainJobSpec(_Kube):
    runtime_ref: RuntimeRef = Field(alias="runtimeRef")
    trainer: Trainer = Field(default_factory=Trainer)
    runtime_patches: list[RuntimePatch] = Field(default_factory=list, alias="runtimePatches")
    suspend: bool | None = None
    active_deadline_seconds: int | None = Field(default=None, alias="activeDeadlineSeconds")

    @field_validator("active_deadline_seconds")
    @classmethod
    def _positive_deadline(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"activeDeadlineSeconds must be at least 1, got {v}")
        return v


class Condition(_Kube):
    type: str
    status: Literal["True", "False", "Unknown"] = "True"
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")


class TrainJobStatus(_Kube):
    conditions: list[Condition] = Field(default_factory=list)


class TrainJob(_Kube):
    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = Field(default=TRAINER_API, alias="apiVersion")
    kind: Literal["TrainJob"] = "TrainJob"
    metadata: ObjectMeta
    spec: TrainJobSpec
    status: TrainJobStatus | None = None

    @field_validator("metadata")
    @classmethod
    def _rfc1035_name(cls, v: ObjectMeta) -> ObjectMeta:
        """The TrainJob CRD's rule (trainer v2.3.0): the name is an RFC 1035 label, since it
        names the JobSet's Services too (a DNS-1123 label starting with a digit is refused)."""
        if not v.name[:1].isalpha():
            raise ValueError(f"metadata.name {v.name!r} must start with a letter (a TrainJob's name is an "
                             "RFC 1035 label: lower-case letters, digits and '-')")
        return v

    # What the cockpit needs from the nested patches, in one place for both backends.
    def pod_patches(self) -> list[PodSpecPatch]:
        found = []
        for patch in self.spec.runtime_patches:
            template = patch.training_runtime_spec and patch.training_runtime_spec.template
            for job in (template.spec.replicated_jobs if template and template.spec else []):
                pod = job.template and job.template.spec and job.template.spec.template
                if pod and pod.spec:
                    found.append(pod.spec)
        return found

    def volume_mounts(self) -> list[tuple[str, str]]:
        """(claim name, mount path) of each PVC mounted into the trainer container."""
        mounts = []
        for spec in self.pod_patches():
            claims = {v.name: v.persistent_volume_claim.claim_name
                      for v in spec.volumes if v.persistent_volume_claim}
            for container in spec.containers:
                if container.name == TRAINER_CONTAINER:
                    mounts += [(claims[m.name], m.mount_path) for m in container.volume_mounts
                               if m.name in claims]
        return mounts

    def node_selector(self) -> dict[str, str]:
        selector: dict[str, str] = {}
        for spec in self.pod_patches():
            selector.update(spec.node_selector)
        return selector


# ---------------------------------------------------------------- Kubeflow Trainer: TrainingRuntime


class TrainingRuntime(_Kube):
    """Kept loose (spec is the upstream JobSet template); the cockpit reads a few fields."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = Field(default=TRAINER_API, alias="apiVersion")
    kind: Literal["TrainingRuntime", "ClusterTrainingRuntime"] = "TrainingRuntime"
    metadata: ObjectMeta
    spec: dict[str, Any]

    def to_manifest(self) -> dict[str, Any]:
        """As applied: empty mappings in the spec mean something here (`torch: {}` picks torch's
        ML policy), so the spec is not pruned."""
        return {**super().to_manifest(), "spec": self.spec}

    def _path(self, *keys: str | int) -> Any:
        node: Any = self.spec
        for key in keys:
            try:
                node = node[key]
            except (KeyError, IndexError, TypeError):
                return None
        return node

    def max_restarts(self) -> int:
        return int(self._path("template", "spec", "failurePolicy", "maxRestarts") or 0)

    def num_nodes(self) -> int:
        return int(self._path("mlPolicy", "numNodes") or 1)

    def num_proc_per_node(self) -> int:
        value = self._path("mlPolicy", "torch", "numProcPerNode")
        return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else 1

    def pod_spec(self) -> dict[str, Any]:
        """The pod template spec of the runtime's `node` replicated job."""
        for job in self._path("template", "spec", "replicatedJobs") or []:
            if job.get("name") == TRAINER_CONTAINER:
                return (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        return {}

    def trainer_container(self) -> dict[str, Any]:
        """The `node` container of the runtime's `node` replicated job (image, command, env)."""
        for container in self.pod_spec().get("containers") or []:
            if container.get("name") == TRAINER_CONTAINER:
                return container
        return {}


# ---------------------------------------------------------------- core/v1 PVC and snapshots


class PVCSpec(_Kube):
    access_modes: list[str] = Field(default_factory=lambda: ["ReadWriteOnce"], alias="accessModes")
    resources: ResourceRequirements = Field(default_factory=lambda: ResourceRequirements(requests={"storage": "1Gi"}))
    storage_class_name: str | None = Field(default=None, alias="storageClassName")


class PersistentVolumeClaim(_Kube):
    api_version: Literal["v1"] = Field(default="v1", alias="apiVersion")
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: ObjectMeta
    spec: PVCSpec = Field(default_factory=PVCSpec)


class SnapshotSource(_Kube):
    persistent_volume_claim_name: str = Field(alias="persistentVolumeClaimName")


class VolumeSnapshotSpec(_Kube):
    source: SnapshotSource
    volume_snapshot_class_name: str | None = Field(default=None, alias="volumeSnapshotClassName")


class VolumeSnapshot(_Kube):
    api_version: Literal["snapshot.storage.k8s.io/v1"] = Field(default=SNAPSHOT_API, alias="apiVersion")
    kind: Literal["VolumeSnapshot"] = "VolumeSnapshot"
    metadata: ObjectMeta
    spec: VolumeSnapshotSpec


class VolumeSnapshotClass(_Kube):
    """How a CSI driver takes snapshots (cluster-scoped; installed, never applied by the cockpit)."""

    api_version: Literal["snapshot.storage.k8s.io/v1"] = Field(default=SNAPSHOT_API, alias="apiVersion")
    kind: Literal["VolumeSnapshotClass"] = "VolumeSnapshotClass"
    metadata: ObjectMeta
    driver: str
    deletion_policy: Literal["Delete", "Retain"] = Field(alias="deletionPolicy")
    parameters: dict[str, str] = Field(default_factory=dict)


# ---------------------------------------------------------------- KubeRay: RayJob (ray.io/v1)


class RayContainer(_Kube):
    """A container of a Ray pod template; the embedded cluster runs the driver with the head
    container's env and mounts (on KubeRay the entrypoint runs on the head node)."""

    name: str
    image: str | None = None
    env: list[EnvVar] = Field(default_factory=list)
    volume_mounts: list[VolumeMount] = Field(default_factory=list, alias="volumeMounts")
    resources: ResourceRequirements | None = None


class RayPodSpec(_Kube):
    containers: list[RayContainer] = Field(default_factory=list)
    volumes: list[PodVolume] = Field(default_factory=list)

    def claim_mounts(self, container: RayContainer) -> list[tuple[str, str]]:
        claims = {v.name: v.persistent_volume_claim.claim_name for v in self.volumes if v.persistent_volume_claim}
        return [(claims[m.name], m.mount_path) for m in container.volume_mounts if m.name in claims]


class RayPodTemplate(_Kube):
    spec: RayPodSpec = Field(default_factory=RayPodSpec)


class RayHeadGroupSpec(_Kube):
    ray_start_params: dict[str, str] = Field(default_factory=dict, alias="rayStartParams")
    template: RayPodTemplate


class RayWorkerGroupSpec(_Kube):
    group_name: str = Field(alias="groupName")
    replicas: int | None = None
    min_replicas: int | None = Field(default=None, alias="minReplicas")
    max_replicas: int | None = Field(default=None, alias="maxReplicas")
    ray_start_params: dict[str, str] = Field(default_factory=dict, alias="rayStartParams")
    template: RayPodTemplate


class RayClusterSpec(_Kube):
    ray_version: str | None = Field(default=None, alias="rayVersion")
    head_group_spec: RayHeadGroupSpec = Field(alias="headGroupSpec")
    worker_group_specs: list[RayWorkerGroupSpec] = Field(default_factory=list, alias="workerGroupSpecs")


class RayJobSpec(_Kube):
    entrypoint: str  # optional upstream (InteractiveMode); the embedded cluster runs it as the driver
    runtime_env_yaml: str | None = Field(default=None, alias="runtimeEnvYAML")
    shutdown_after_job_finishes: bool | None = Field(default=None, alias="shutdownAfterJobFinishes")
    ray_cluster_spec: RayClusterSpec | None = Field(default=None, alias="rayClusterSpec")
    cluster_selector: dict[str, str] = Field(default_factory=dict, alias="clusterSelector")

    @field_validator("entrypoint")
    @classmethod
    def _has_command(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("entrypoint is empty: give the command the driver runs")
        return v

    @field_validator("runtime_env_yaml")
    @classmethod
    def _yaml_mapping(cls, v: str | None) -> str | None:
        if v is not None:
            runtime_env_of(v)
        return v

    @model_validator(mode="after")
    def _has_cluster(self) -> "RayJobSpec":
        if self.ray_cluster_spec is None and not self.cluster_selector:
            raise ValueError("one of rayClusterSpec or clusterSelector is required (the Ray cluster the job runs on)")
        return self


def runtime_env_of(text: str) -> dict[str, Any]:
    """A RayJob's runtimeEnvYAML as a mapping (ValueError in one line if it is not one)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"runtimeEnvYAML is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("runtimeEnvYAML must be a mapping (e.g. env_vars: {KEY: value})")
    env_vars = data.get("env_vars") or {}
    if not isinstance(env_vars, dict):
        raise ValueError("runtimeEnvYAML env_vars must be a mapping of names to values")
    return data


class RayJob(_Kube):
    api_version: Literal["ray.io/v1"] = Field(default=RAY_API, alias="apiVersion")
    kind: Literal["RayJob"] = "RayJob"
    metadata: ObjectMeta
    spec: RayJobSpec
    status: dict[str, Any] | None = None

    def head_container(self) -> RayContainer | None:
        cluster = self.spec.ray_cluster_spec
        containers = cluster.head_group_spec.template.spec.containers if cluster else []
        return containers[0] if containers else None  # KubeRay: the first container is Ray's

    def volume_mounts(self) -> list[tuple[str, str]]:
        """(claim name, mount path) of each PVC mounted into the head container."""
        head = self.head_container()
        if head is None:
            return []
        return self.spec.ray_cluster_spec.head_group_spec.template.spec.claim_mounts(head)

    def runtime_env(self) -> dict[str, Any]:
        return runtime_env_of(self.spec.runtime_env_yaml) if self.spec.runtime_env_yaml else {}


def unknown_fields(model: BaseModel, path: str = "") -> list[str]:
    """Dotted paths of fields a parsed resource carries beyond what the cockpit models, the way
    an API server's strict field validation would list them."""
    found = [f"{path}{key}" for key in (model.__pydantic_extra__ or {})]
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        key = f"{path}{info.alias or name}"
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, _Kube):
                found += unknown_fields(item, f"{key}[{i}]." if isinstance(value, list) else f"{key}.")
    return found


Resource = Annotated[
    Union[TrainJob, TrainingRuntime, PersistentVolumeClaim, VolumeSnapshot, RayJob],
    Field(discriminator="kind"),
]
KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "PersistentVolumeClaim", "VolumeSnapshot", "RayJob")


class _Doc(BaseModel):
    resource: Resource


def parse_resource(doc: Any, where: str = "manifest") -> Any:
    """One YAML/JSON document as a typed resource, or ManifestError in one line."""
    if not isinstance(doc, dict):
        raise ManifestError(f"{where}: expected a mapping with apiVersion and kind")
    kind = doc.get("kind")
    if kind not in KINDS:
        raise ManifestError(f"{where}: unsupported kind {kind!r} (supported: {', '.join(KINDS)})")
    try:
        return _Doc.model_validate({"resource": doc}).resource
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"][2:]) or "(document)"
        message = first["msg"].removeprefix("Value error, ")
        name = (doc.get("metadata") or {}).get("name", "?")
        raise ManifestError(f"{where}: {kind} {name}: {path}: {message}") from None


def yaml_documents(text: str, source: str = "manifest") -> list[Any]:
    """The non-empty documents of a (multi-document) YAML text, or ManifestError in one line."""
    import yaml

    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise ManifestError(f"{source}: not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None


def parse_manifests(text: str, source: str = "manifest") -> list[Any]:
    """Every document of a (multi-document) YAML text; empty documents are skipped."""
    docs = yaml_documents(text, source)
    if not docs:
        raise ManifestError(f"{source}: no documents")
    return [parse_resource(d, f"{source} (document {i + 1})") for i, d in enumerate(docs)]


# ---------------------------------------------------------------- what the cockpit observes


class PodPhase(str, Enum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def finished(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED)


class Pod(BaseModel):
    name: str
    job: str
    rank: int  # node rank (job-completion-index); DRIVER_RANK (-1) for a RayJob's driver
    restart_attempt: int = 0
    phase: PodPhase = PodPhase.PENDING
    node: str = ""
    restarts: int = 0  # container restarts of this pod (0 under the group-restart policy)
    created: float  # epoch seconds
    started: float | None = None
    finished: float | None = None
    exit_code: int | None = None
    reason: str = ""  # e.g. "Killed", "Error", "Completed", "Unschedulable"
    message: str = ""  # why, where a reason needs it (what the scheduler found short)
    image: str = ""
    last_step: int | None = None
    last_loss: float | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class PodUsage(BaseModel):
    """What metrics.k8s.io says a pod uses now (its containers summed), as `kubectl top pod`."""

    pod: str
    cpu_cores: float  # cores over the metrics window (0.25 is "250m")
    memory_bytes: float  # working set
    at: float | None = None  # epoch seconds of the sample


class PodEventType(str, Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


class PodEvent(BaseModel):
    type: PodEventType
    pod: Pod


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line a worker printed. A slotted dataclass, not a BaseModel: logs arrive at up to
    100k lines/s and need no validation (they come from our own parser)."""

    pod: str
    rank: int
    time: float
    text: str
    step: int | None = None
    loss: float | None = None

    @classmethod
    def parsed(cls, pod: str, rank: int, time: float, text: str) -> "LogLine":
        """The line with its step and loss read from the text (either backend's logs)."""
        found = step_and_loss(text)
        return cls(pod, rank, time, text, *(found or (None, None)))


class JobPhase(str, Enum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    COMPLETE = "Complete"
    FAILED = "Failed"

    @property
    def finished(self) -> bool:
        return self in (JobPhase.COMPLETE, JobPhase.FAILED)


class JobSummary(BaseModel):
    """A TrainJob as observed: the phase the cockpit shows plus the Trainer-style conditions."""

    name: str
    phase: JobPhase
    num_nodes: int
    restart_attempt: int = 0
    max_restarts: int = 0
    created: float
    finished: float | None = None
    reason: str = ""
    message: str = ""
    volumes: list[str] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    launcher: str = "torchrun"  # or "ray" (a RayJob)


class VolumeInfo(BaseModel):
    name: str
    size_bytes: int = 0
    files: int = 0
    created: float | None = None
    capacity: str = ""  # the PVC's requested storage


class Checkpoint(BaseModel):
    volume: str
    path: str  # relative to the volume root, e.g. "lesson-ddp/ckpt-step-000015.pt"
    run: str  # the directory in the volume it belongs to ("" for the root)
    step: int
    world_size: int
    loss: float | None = None
    size_bytes: int
    created: float | None = None
    valid: bool
    problem: str = ""


class RunMetrics(BaseModel):
    """metrics.json of one run, with where it was found."""

    run: str
    final_loss: float
    steps: int
    world_size: int
    wall_seconds: float
    resumes: int = 0
    launcher: str = "torchrun"
    loss_history: list[float] = Field(default_factory=list)
    params_sha256: str = ""  # of the final parameters: equal runs end with equal digests
    written: float | None = None  # when metrics.json was written (its mtime): which runs are newest


class Snapshot(BaseModel):
    name: str
    volume: str
    created: float
    ready: bool = True
    files: int = 0
    size_bytes: int = 0
    metrics: list[RunMetrics] = Field(default_factory=list)


class Check(BaseModel):
    """One preflight check: what was checked, what was seen, and what fixes it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


class Evidence(BaseModel):
    """What a lesson step's verify found: pass or not, what it checked and what it saw."""

    ok: bool
    checked: str
    seen: str
    details: list[str] = Field(default_factory=list)
    at: float | None = None
