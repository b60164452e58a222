"""A Kubernetes pod (the JSON the API server returns) as the cockpit's `Pod`.

Rank is the Indexed Job's completion index and the restart attempt is JobSet's label: both are
labels the Job and JobSet controllers put on every worker pod of a TrainJob. A RayJob's pods on
the embedded cluster carry them too (rank "driver" on the driver); on KubeRay they carry KubeRay's
labels only (models.RAY_LABEL_*): the submitter and the head are the driver's side (DRIVER_RANK),
a worker's rank is its replica index where KubeRay sets one, and the job is named by the submitter's
ray.io/originated-from-cr-name or, for the Ray cluster's pods, by whoever selected them (`job`).
"""

from __future__ import annotations

from datetime import datetime

from backend.models import (
    DRIVER_RANK,
    LABEL_JOB,
    LABEL_JOB_UID,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    TRAINER_CONTAINER,
    Pod,
    RAY_LABEL_NODE_TYPE,
    RAY_LABEL_ORIGINATED_CRD,
    RAY_LABEL_ORIGINATED_NAME,
    RAY_LABEL_REPLICA_INDEX,
    PodPhase,
)

# The completion index is also an annotation (always present on Indexed Job pods; the label
# only since Kubernetes 1.28).
ANNOTATION_RANK = "batch.kubernetes.io/job-completion-index"


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (with or without fractions, 'Z' or an offset) as epoch seconds."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _int(value: object, default: int = 0) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def trainer_status(raw: dict) -> dict:
    """The status of the trainer container (`node`), else of the first container."""
    statuses = (raw.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == TRAINER_CONTAINER:
            return status
    return statuses[0] if statuses else {}


def log_container(raw: dict) -> str:
    """The container whose log is the pod's: the trainer's, else the first (KubeRay: Ray's own,
    utils.RayContainerIndex; the submitter's)."""
    names = [c.get("name", "") for c in (raw.get("spec") or {}).get("containers") or []]
    return TRAINER_CONTAINER if TRAINER_CONTAINER in names or not names else names[0]


def _rank(labels: dict, annotations: dict) -> int:
    index = labels.get(LABEL_RANK, annotations.get(ANNOTATION_RANK))
    if index is not None:
        return DRIVER_RANK if index == "driver" else _int(index)
    if labels.get(RAY_LABEL_NODE_TYPE) == "head" or labels.get(RAY_LABEL_ORIGINATED_CRD) == "RayJob":
        return DRIVER_RANK
    return _int(labels.get(RAY_LABEL_REPLICA_INDEX))


def _procs(spec: dict) -> int:
    """The ranks a pod runs: its trainer's PET_NPROC_PER_NODE (the Trainer's torch plugin sets it),
    "auto" being one per GPU it was given, as torchrun's auto does where GPUs are visible."""
    for container in spec.get("containers") or []:
        if container.get("name") != TRAINER_CONTAINER:
            continue
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        value = str(env.get("PET_NPROC_PER_NODE") or "1")
        if value == "auto":
            limits = (container.get("resources") or {}).get("limits") or {}
            value = str(limits.get("nvidia.com/gpu") or "1")
        return max(1, _int(value, 1))
    return 1


def pod_from(raw: dict, deleted: bool = False, job: str = "") -> Pod:
    """`job`: the job the caller selected the pod for, when no label of the pod names it."""
    meta = raw.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    container = trainer_status(raw)
    state = container.get("state") or {}
    running, terminated, waiting = (state.get(k) or {} for k in ("running", "terminated", "waiting"))
    try:
        phase = PodPhase(status.get("phase") or "Pending")
    except ValueError:
        phase = PodPhase.UNKNOWN
    reason = terminated.get("reason") or waiting.get("reason") or status.get("reason") or ""
    if (deleted or meta.get("deletionTimestamp")) and not phase.finished:
        reason = "Deleted" if deleted else "Terminating"
    images = [c.get("image", "") for c in spec.get("containers") or []
              if c.get("name") == TRAINER_CONTAINER] or [c.get("image", "") for c in spec.get("containers") or []]
    return Pod(
        name=meta.get("name", ""),
        job=labels.get(LABEL_JOB) or labels.get(RAY_LABEL_ORIGINATED_NAME) or job,
        rank=_rank(labels, annotations),
        procs=_procs(spec),
        restart_attempt=_int(labels.get(LABEL_RESTART_ATTEMPT)),
        phase=phase,
        node=spec.get("nodeName") or "",
        restarts=_int(container.get("restartCount")),
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        started=parse_time(running.get("startedAt") or terminated.get("startedAt") or status.get("startTime")),
        finished=parse_time(terminated.get("finishedAt")),
        exit_code=terminated.get("exitCode"),
        reason=reason,
        image=images[0] if images else "",
        labels=labels,
        job_uid=labels.get(LABEL_JOB_UID, ""),
    )


def has_started(raw: dict) -> bool:
    """True once the trainer container has run (its log can be read)."""
    state = trainer_status(raw).get("state") or {}
    return bool(state.get("running") or state.get("terminated"))
