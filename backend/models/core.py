"""The base of every declared resource and the core Kubernetes shapes they share: object metadata,
the core/v1 pieces a patch or a pod template carries, metav1 conditions, PersistentVolumeClaims
and CSI VolumeSnapshots (snapshot.storage.k8s.io/v1).

Declared resources keep the upstream field names (camelCase, via aliases) and keep unknown fields
(`extra="allow"`), so one YAML file applies unchanged to the embedded cluster and to Kubernetes.
Only the fields the cockpit acts on are typed and validated; the full upstream schema is checked
in tests against the `kubeflow_trainer_api` models.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SNAPSHOT_API = "snapshot.storage.k8s.io/v1"

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class KubeModel(BaseModel):
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


def on_claim(path: str, mounts: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(claim, the path inside it) of a container path under one of its (claim, mount path)
    mounts, the deepest one; None when no volume holds it."""
    clean = posixpath.normpath(path)
    found = None
    for claim, mount in mounts:
        mount = posixpath.normpath(mount)
        inside = posixpath.relpath(clean, mount)
        if not inside.startswith("..") and (found is None or len(mount) > len(found[2])):
            found = (claim, "" if inside == "." else inside, mount)
    return None if found is None else found[:2]


def check_name(name: str, what: str = "name") -> str:
    """A Kubernetes object name (RFC 1123 label, at most 63 characters)."""
    if len(name) > 63 or not _DNS1123.match(name):
        raise ValueError(
            f"{what} {name!r} is not a valid name: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return name


class ObjectMeta(KubeModel):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        """Any object's name upstream: an RFC 1123 subdomain (dots allowed; a kind that needs a
        label, as a TrainJob's DNS-1035 name, says so itself)."""
        if len(v) > 253 or not _DNS1123_SUBDOMAIN.match(v):
            raise ValueError(f"metadata.name {v!r} is not a valid name: lower-case letters, digits, '-' and '.', "
                             "starting and ending with a letter or digit, at most 253 characters")
        return v


# ---------------------------------------------------------------- core/v1 pieces used in patches


class EnvVar(KubeModel):
    name: str
    value: str | None = None


class ResourceRequirements(KubeModel):
    requests: dict[str, str | int | float] = Field(default_factory=dict)
    limits: dict[str, str | int | float] = Field(default_factory=dict)


class VolumeMount(KubeModel):
    name: str
    mount_path: str = Field(alias="mountPath")
    read_only: bool | None = Field(default=None, alias="readOnly")

    @field_validator("mount_path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"mountPath {v!r} must be an absolute path")
        return v


class PVCSource(KubeModel):
    claim_name: str = Field(alias="claimName")


class PodVolume(KubeModel):
    name: str
    persistent_volume_claim: PVCSource | None = Field(default=None, alias="persistentVolumeClaim")


# ---------------------------------------------------------------- metav1.Condition (TrainJob status)


class Condition(KubeModel):
    type: str
    status: Literal["True", "False", "Unknown"] = "True"
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")


# ---------------------------------------------------------------- core/v1 PVC and snapshots


class PVCSpec(KubeModel):
    access_modes: list[str] = Field(default_factory=lambda: ["ReadWriteOnce"], alias="accessModes")
    resources: ResourceRequirements = Field(default_factory=lambda: ResourceRequirements(requests={"storage": "1Gi"}))
    storage_class_name: str | None = Field(default=None, alias="storageClassName")


class PersistentVolumeClaim(KubeModel):
    api_version: Literal["v1"] = Field(default="v1", alias="apiVersion")
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: ObjectMeta
    spec: PVCSpec = Field(default_factory=PVCSpec)


class SnapshotSource(KubeModel):
    persistent_volume_claim_name: str = Field(alias="persistentVolumeClaimName")


class VolumeSnapshotSpec(KubeModel):
    source: SnapshotSource
    volume_snapshot_class_name: str | None = Field(default=None, alias="volumeSnapshotClassName")


class VolumeSnapshot(KubeModel):
    api_version: Literal["snapshot.storage.k8s.io/v1"] = Field(default=SNAPSHOT_API, alias="apiVersion")
    kind: Literal["VolumeSnapshot"] = "VolumeSnapshot"
    metadata: ObjectMeta
    spec: VolumeSnapshotSpec


class VolumeSnapshotClass(KubeModel):
    """How a CSI driver takes snapshots (cluster-scoped; installed, never applied by the cockpit)."""

    api_version: Literal["snapshot.storage.k8s.io/v1"] = Field(default=SNAPSHOT_API, alias="apiVersion")
    kind: Literal["VolumeSnapshotClass"] = "VolumeSnapshotClass"
    metadata: ObjectMeta
    driver: str
    deletion_policy: Literal["Delete", "Retain"] = Field(alias="deletionPolicy")
    parameters: dict[str, str] = Field(default_factory=dict)
