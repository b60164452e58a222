"""Kubeflow Trainer's declared resources (trainer.kubeflow.org/v1alpha1, trainer v2.3.0): the
TrainJob with the runtime patches the cockpit writes (volumes, env, node selector of the trainer
container), and the TrainingRuntime it runs on, kept loose.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from backend.models.core import (
    Condition,
    EnvVar,
    KubeModel,
    ObjectMeta,
    PodVolume,
    ResourceRequirements,
    VolumeMount,
)

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
DEFAULT_RUNTIME = "kfcockpit-torch"
# Container name of the trainer in the Trainer's torch runtimes; patches and mounts target it.
TRAINER_CONTAINER = "node"


# ---------------------------------------------------------------- Kubeflow Trainer: TrainJob


class RuntimeRef(KubeModel):
    name: str
    kind: str = "ClusterTrainingRuntime"  # the TrainJob CRD's default (trainer v2.3.0)
    api_group: str = Field(default="trainer.kubeflow.org", alias="apiGroup")


class Trainer(KubeModel):
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


class ContainerPatch(KubeModel):
    name: str
    env: list[EnvVar] = Field(default_factory=list)
    volume_mounts: list[VolumeMount] = Field(default_factory=list, alias="volumeMounts")


class PodSpecPatch(KubeModel):
    volumes: list[PodVolume] = Field(default_factory=list)
    containers: list[ContainerPatch] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")


class PodTemplatePatch(KubeModel):
    spec: PodSpecPatch | None = None


class JobSpecPatch(KubeModel):
    template: PodTemplatePatch | None = None


class JobTemplatePatch(KubeModel):
    spec: JobSpecPatch | None = None


class ReplicatedJobPatch(KubeModel):
    name: str
    template: JobTemplatePatch | None = None


class JobSetSpecPatch(KubeModel):
    replicated_jobs: list[ReplicatedJobPatch] = Field(default_factory=list, alias="replicatedJobs")


class JobSetTemplatePatch(KubeModel):
    spec: JobSetSpecPatch | None = None


class TrainingRuntimeSpecPatch(KubeModel):
    template: JobSetTemplatePatch | None = None


class RuntimePatch(KubeModel):
    manager: str
    training_runtime_spec: TrainingRuntimeSpecPatch | None = Field(default=None, alias="trainingRuntimeSpec")


class TrainJobSpec(KubeModel):
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


class TrainJobStatus(KubeModel):
    conditions: list[Condition] = Field(default_factory=list)


class TrainJob(KubeModel):
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


class TrainingRuntime(KubeModel):
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
