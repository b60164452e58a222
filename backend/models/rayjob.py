"""KubeRay's RayJob (ray.io/v1) as declared: the entrypoint the driver runs, its runtime env and
the Ray cluster's pod templates, of which the cockpit reads the head container's env and mounts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from backend.models.core import EnvVar, KubeModel, ObjectMeta, PodVolume, ResourceRequirements, VolumeMount

RAY_API = "ray.io/v1"  # KubeRay's RayJob


class RayContainer(KubeModel):
    """A container of a Ray pod template; the embedded cluster runs the driver with the head
    container's env and mounts (on KubeRay the entrypoint runs on the head node)."""

    name: str
    image: str | None = None
    env: list[EnvVar] = Field(default_factory=list)
    volume_mounts: list[VolumeMount] = Field(default_factory=list, alias="volumeMounts")
    resources: ResourceRequirements | None = None


class RayPodSpec(KubeModel):
    containers: list[RayContainer] = Field(default_factory=list)
    volumes: list[PodVolume] = Field(default_factory=list)

    def claim_mounts(self, container: RayContainer) -> list[tuple[str, str]]:
        claims = {v.name: v.persistent_volume_claim.claim_name for v in self.volumes if v.persistent_volume_claim}
        return [(claims[m.name], m.mount_path) for m in container.volume_mounts if m.name in claims]


class RayPodTemplate(KubeModel):
    spec: RayPodSpec = Field(default_factory=RayPodSpec)


class RayHeadGroupSpec(KubeModel):
    ray_start_params: dict[str, str] = Field(default_factory=dict, alias="rayStartParams")
    template: RayPodTemplate


class RayWorkerGroupSpec(KubeModel):
    group_name: str = Field(alias="groupName")
    replicas: int | None = None
    min_replicas: int | None = Field(default=None, alias="minReplicas")
    max_replicas: int | None = Field(default=None, alias="maxReplicas")
    ray_start_params: dict[str, str] = Field(default_factory=dict, alias="rayStartParams")
    template: RayPodTemplate


class RayClusterSpec(KubeModel):
    ray_version: str | None = Field(default=None, alias="rayVersion")
    head_group_spec: RayHeadGroupSpec = Field(alias="headGroupSpec")
    worker_group_specs: list[RayWorkerGroupSpec] = Field(default_factory=list, alias="workerGroupSpecs")


class RayJobSpec(KubeModel):
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


class RayJob(KubeModel):
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
