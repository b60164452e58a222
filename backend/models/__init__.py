"""Pydantic types shared by every part, one module per responsibility:

- `core`: the base of every declared resource (upstream Kubernetes shapes: camelCase aliases,
  unknown fields kept) and the core pieces they share; PVCs and CSI VolumeSnapshots.
- `trainer`: Kubeflow Trainer's TrainJob and TrainingRuntime. `rayjob`: KubeRay's RayJob.
- `manifests`: YAML documents parsed into those, errors as one-line ManifestErrors.
- `labels`: the label keys pods are found by, on both platforms.
- `observed`: what the cockpit observes (pods, log lines, job summaries, checkpoints, snapshots,
  checks, evidence); `nodes`, the nodes and Events. `focus`: which pods' logs a followed job's
  stream reads.

Callers import from here (`from backend.models import TrainJob`); the modules import each other
directly.
"""

from __future__ import annotations

from backend.errors import ManifestError
from backend.models.core import (
    SNAPSHOT_API,
    Condition,
    EnvVar,
    ObjectMeta,
    PersistentVolumeClaim,
    PodVolume,
    PVCSource,
    PVCSpec,
    ResourceRequirements,
    SnapshotSource,
    VolumeMount,
    VolumeSnapshot,
    VolumeSnapshotClass,
    VolumeSnapshotSpec,
    check_name,
    on_claim,
)
from backend.models.labels import (
    DRIVER_RANK,
    FREEZE_ANNOTATION,
    SLOW_ANNOTATION,
    LABEL_JOB,
    LABEL_JOB_UID,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    RAY_LABEL_CLUSTER,
    RAY_LABEL_GROUP,
    RAY_LABEL_NODE_TYPE,
    RAY_LABEL_ORIGINATED_CRD,
    RAY_LABEL_ORIGINATED_NAME,
    RAY_LABEL_REPLICA_INDEX,
)
from backend.models.focus import MAX_FOLLOWED, LogFocus
from backend.models.manifests import KINDS, Resource, parse_manifests, parse_resource, unknown_fields, yaml_documents
from backend.models.nodes import GPU, ClusterEvent, NodeEvent, NodeSummary, Taint
from backend.models.observed import (
    Check,
    Checkpoint,
    Evidence,
    JobPhase,
    JobSummary,
    LogLine,
    Pod,
    PodEvent,
    PodEventType,
    PodPhase,
    PodUsage,
    RunMetrics,
    Snapshot,
    VolumeInfo,
)
from backend.models.rayjob import (
    RAY_API,
    RayClusterSpec,
    RayContainer,
    RayHeadGroupSpec,
    RayJob,
    RayJobSpec,
    RayPodSpec,
    RayPodTemplate,
    RayWorkerGroupSpec,
    runtime_env_of,
)
from backend.models.trainer import (
    DEFAULT_RUNTIME,
    TRAINER_API,
    TRAINER_CONTAINER,
    ContainerPatch,
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    PodSpecPatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    RuntimeRef,
    Trainer,
    TrainingRuntime,
    TrainingRuntimeSpecPatch,
    TrainJob,
    TrainJobSpec,
    TrainJobStatus,
)

__all__ = [
    # declared: core
    "SNAPSHOT_API", "Condition", "EnvVar", "ObjectMeta", "PersistentVolumeClaim", "PodVolume", "PVCSource",
    "PVCSpec", "ResourceRequirements", "SnapshotSource", "VolumeMount", "VolumeSnapshot",
    "VolumeSnapshotClass", "VolumeSnapshotSpec", "check_name", "on_claim",
    # declared: Kubeflow Trainer
    "DEFAULT_RUNTIME", "TRAINER_API", "TRAINER_CONTAINER", "ContainerPatch", "JobSetSpecPatch",
    "JobSetTemplatePatch", "JobSpecPatch", "JobTemplatePatch", "PodSpecPatch", "PodTemplatePatch",
    "ReplicatedJobPatch", "RuntimePatch", "RuntimeRef", "Trainer", "TrainingRuntime",
    "TrainingRuntimeSpecPatch", "TrainJob", "TrainJobSpec", "TrainJobStatus",
    # declared: KubeRay
    "RAY_API", "RayClusterSpec", "RayContainer", "RayHeadGroupSpec", "RayJob", "RayJobSpec", "RayPodSpec",
    "RayPodTemplate", "RayWorkerGroupSpec", "runtime_env_of",
    # manifests
    "KINDS", "ManifestError", "Resource", "parse_manifests", "parse_resource", "unknown_fields",
    "yaml_documents",
    # labels
    "DRIVER_RANK", "FREEZE_ANNOTATION", "SLOW_ANNOTATION",
    "LABEL_JOB", "LABEL_JOB_UID", "LABEL_RANK", "LABEL_RESTART_ATTEMPT",
    "RAY_LABEL_CLUSTER",
    "RAY_LABEL_GROUP", "RAY_LABEL_NODE_TYPE", "RAY_LABEL_ORIGINATED_CRD", "RAY_LABEL_ORIGINATED_NAME",
    "RAY_LABEL_REPLICA_INDEX",
    # observed
    "Check", "Checkpoint", "Evidence", "JobPhase", "JobSummary", "LogLine", "Pod", "PodEvent", "PodEventType",
    "PodPhase", "PodUsage", "RunMetrics", "Snapshot", "VolumeInfo",
    # focus
    "MAX_FOLLOWED", "LogFocus",
    # nodes and events
    "GPU", "ClusterEvent", "NodeEvent", "NodeSummary", "Taint",
]
