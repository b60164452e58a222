"""What the cockpit observes, whatever the platform: pods and their events, log lines, jobs as
summarized, volumes, checkpoints, run metrics, snapshots, preflight checks and a step's evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pydantic import BaseModel, Field

from backend.models.core import Condition
from training.logfmt import step_and_loss


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
    procs: int = 1  # the ranks it runs (torchrun's processes per node: PET_NPROC_PER_NODE)
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
    job_uid: str = ""  # the uid of the JobSet (or Job) that made it: a job applied again is another

    @property
    def ranks(self) -> range:
        """Its global ranks: node rank × processes per node, one per local rank (torchrun's
        RANK = GROUP_RANK × LOCAL_WORLD_SIZE + LOCAL_RANK with the static rendezvous)."""
        if self.rank < 0:
            return range(self.rank, self.rank + 1)
        return range(self.rank * self.procs, (self.rank + 1) * self.procs)


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
        """The line with its step and loss read from the text (either backend's logs), and its
        rank as the line says it (`rank=`): a pod runs one rank per GPU, so `rank`, the pod's
        first, is only for lines that do not say (torchrun's own, a traceback). A Ray driver's
        lines stay the driver's: the workers' lines it forwards (log_to_driver) are read from the
        workers' own pods."""
        found = step_and_loss(text)
        return cls(pod, rank_in(text, rank) if rank >= 0 else rank, time, text, *(found or (None, None)))


def rank_in(text: str, default: int) -> int:
    """The `rank=N` of a logfmt line (training/logfmt.py), else `default`. Cheap: it runs on
    every line read."""
    at = text.find("rank=")
    while at >= 0:
        if at == 0 or text[at - 1] == " ":
            end = text.find(" ", at)
            value = text[at + 5:end if end >= 0 else len(text)]
            if value.isdigit():
                return int(value)
            return default
        at = text.find("rank=", at + 5)
    return default


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
    uid: str = ""  # metadata.uid: a job deleted and applied again under its name is another job
    group_uid: str = ""  # its JobSet's uid, once there is one: what its pods carry (Pod.job_uid)
    restart_attempt: int = 0
    max_restarts: int = 0
    # JobSet's status.restartsCountTowardsMax: the restarts its budget counts (not those of a
    # RestartJobSetAndIgnoreMaxRestarts rule); None where the JobSet does not say
    restarts_counted: int | None = None
    created: float
    finished: float | None = None
    reason: str = ""
    message: str = ""
    volumes: list[str] = Field(default_factory=list)
    # (claim, directory in it) where its workers keep checkpoints and their run record
    run_dirs: list[tuple[str, str]] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    launcher: str = "torchrun"  # or "ray" (a RayJob)
    # status.trainerStatus (Trainer v2.3's TrainJobStatus gate): what the job's rank 0 reported
    progress: int | None = None  # progressPercentage
    remaining: int | None = None  # estimatedRemainingSeconds

    def same_job(self, other: "JobSummary") -> bool:
        """Whether `other` (of the same name) is this very job, not one applied again after it was
        deleted: their uids (creation times, to the second, where a source has no uid: two
        applied within one second would pass for one)."""
        if self.uid and other.uid:
            return self.uid == other.uid
        return self.created == other.created


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

    def is_run(self, name: str) -> bool:
        """Whether these are the metrics of run `name`: its directory on the volume, or the last
        part of it (a Ray Train run sits below its storage dir, e.g. `ray/<name>`)."""
        return self.run == name or self.run.endswith(f"/{name}")

    @staticmethod
    def of_run(found: "list[RunMetrics]", name: str) -> "RunMetrics | None":
        return next((m for m in found if m.is_run(name)), None)


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
