"""The Cluster protocol: one async interface over any Kubernetes with Kubeflow Trainer, the embedded
local cluster included, and the Capabilities a platform advertises beside it.

The UI, the CLI, the lesson engine and pipeline components talk only to this, so none of them asks
which platform it runs on: where one differs (a fresh cluster for the lesson's last step, a volume's
files on this machine for kfp.local, warm workers), it asks what the platform can do, as Harlequin's
adapters advertise their optional features. Resources are declared (`apply`), the platform
reconciles them into pods, and observers list-then-watch.

Errors an operator can act on are `ClusterError`s whose `str()` is one line (the CLI prints it and
exits 2; the TUI shows it as a notification). Anything else is a bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, Collection, Literal, Protocol, runtime_checkable

from backend.anatomy.model import Anatomy
from backend.errors import ClusterError, InvalidResource, NotFound, Timeout, Unavailable  # noqa: F401 (re-exported)
from backend.models import (
    Check,
    Checkpoint,
    ClusterEvent,
    JobPhase,
    JobSummary,
    LogFocus,
    LogLine,
    NodeEvent,
    Pod,
    PodEvent,
    PodUsage,
    RunMetrics,
    Snapshot,
    VolumeInfo,
)
from backend.settings import Settings


class FreshCluster(Protocol):
    """A clean cluster of the platform's kind, of its own (the lesson's last step reproduces a run
    on one): what to connect to (`settings`; `kubeconfig` for kubectl), and its life cycle."""

    settings: Settings

    @property
    def kubeconfig(self) -> Path: ...

    async def up(self, warm: bool) -> None: ...

    async def down(self) -> None: ...


class Playback(Protocol):
    """The clock of a recording being played (backend/recording/playhead.py): where it is and
    how fast, and the keys that move it."""

    length: float

    @property
    def speed(self) -> float: ...

    @property
    def paused(self) -> bool: ...

    def position(self) -> float: ...

    def toggle_pause(self) -> bool: ...

    def faster(self, steps: int = 1) -> float: ...

    def seek(self, position: float) -> float: ...


@dataclass(frozen=True)
class Capabilities:
    """What a platform can do beside the Kubernetes API; an optional feature it lacks is None.

    `description` names it for a person ("the embedded local cluster"), `record` with its
    settings (context, namespace, state root). `pods_here`: its pods are processes of this
    machine, so resource requests and node selection place them but isolate nothing.
    `pipelines_here`: pipelines run on this machine with kfp.local, not on a Pipelines endpoint.
    `freezes_pods`: its kubelet stops a pod's processes on FREEZE_ANNOTATION (`freeze_pod`).
    `slows_pods`: how its kubelet slows a pod on SLOW_ANNOTATION (`slow_pod`), None where it cannot.
    `fail_node(name)` / `restore_node(name)`: the machine of a node lost (every process on it ends,
    its kubelet stops posting status), or back; each returns one line saying what it did.
    `fresh(home)`: a clean cluster of its kind at a new state root. `volume_path(claim)`: the
    directory of a bound claim's files on this machine, in the settings' namespace (a kfp.local
    task's mount; `Cluster.wait_volume` first). `warm()`:
    start what makes its pods start fast, now. `checks()`: its own setup checks. `revive()`:
    start its API server again when a connection lost it, and return its address.
    `read_only`: why nothing asked of it changes a cluster (one line; a replay), None where things
    do. `playback`: the clock of the recording it plays.
    """

    description: str
    record: str
    pods_here: bool = False
    pipelines_here: bool = False
    freezes_pods: bool = False
    slows_pods: str | None = None
    fail_node: Callable[[str], Awaitable[str]] | None = None
    restore_node: Callable[[str], Awaitable[str]] | None = None
    fresh: Callable[[Path], FreshCluster] | None = None
    volume_path: Callable[[str], Path] | None = None
    warm: Callable[[], Awaitable[None]] | None = None
    checks: Callable[[], Awaitable[list[Check]]] | None = None
    revive: Callable[[], str] | None = None
    read_only: str | None = None
    playback: Playback | None = None


ResourceKind = Literal["TrainJob", "TrainingRuntime", "PersistentVolumeClaim", "VolumeSnapshot", "Pod", "RayJob"]


@runtime_checkable
class Cluster(Protocol):
    """What a platform offers the cockpit. All methods may raise ClusterError."""

    capabilities: Capabilities

    async def apply(self, resource) -> str:
        """Create or update a declared resource (a `backend.models.Resource`); returns
        "<kind>/<name> created|configured|unchanged"."""
        ...

    async def delete(self, kind: ResourceKind, name: str) -> None:
        """Delete a resource; deleting a TrainJob stops its pods. NotFound if absent."""
        ...

    async def get_job(self, name: str) -> JobSummary: ...

    async def list_jobs(self) -> list[JobSummary]: ...

    async def list_pods(self, job: str | None = None) -> list[Pod]: ...

    async def explain(self, job: str, rank: int = 1) -> "Anatomy":
        """A TrainJob's anatomy (backend/anatomy): its chain of objects, what its runtime patches
        changed, and rank `rank`'s pod taken apart piece by piece, with who put each piece
        there. Reads objects only. NotFound if there is no such TrainJob."""
        ...

    def watch_pods(self, job: str | None = None) -> AsyncIterator[PodEvent]:
        """List-then-watch: first an ADDED event per existing pod, then every change of a pod's
        state as it happens (phase, restart attempt, how it ended), until the caller stops
        iterating; one stream however many pods (what they print is `stream_logs`'). Replacement
        pods of a restarted group arrive as ADDED. Never a polling loop: the API server's watch."""
        ...

    def watch_jobs(self) -> AsyncIterator[JobSummary]:
        """Each job's summary now, then again whenever its phase or restart attempt changes."""
        ...

    def watch_nodes(self) -> AsyncIterator[NodeEvent]:
        """List-then-watch of the nodes: each node's summary (Ready, cordoned, taints, allocatable,
        and what the unfinished pods bound to it request), then again whenever that changes."""
        ...

    async def list_events(self) -> list[ClusterEvent]:
        """The Events in the cockpit's namespace now, and those about Nodes (read once)."""
        ...

    def watch_events(self) -> AsyncIterator[ClusterEvent]:
        """List-then-watch of the Events in the cockpit's namespace and those about Nodes: each
        one there is, then each new one and each repeat."""
        ...

    async def cordon_node(self, name: str, unschedulable: bool) -> None:
        """kubectl cordon (True) or uncordon (False); NotFound if there is no such node."""
        ...

    def stream_logs(self, job: str, follow: bool = True,
                    focus: LogFocus | None = None) -> AsyncIterator[list[LogLine]]:
        """All workers' lines of a job from the start, merged, in batches; with `follow`, keeps
        going and picks up replacement pods (like stern) until the job finishes. With a `focus`
        (followed), only the pods of the ranks it wants, changed as the caller changes it, and
        open until the caller stops reading (backend/models/focus.py)."""
        ...

    async def pod_log(self, pod: str, previous: bool = False) -> list[LogLine]:
        """One pod's whole log, read once, not followed (`kubectl logs POD`): its trainer
        container's, or with `previous` the one that ran before the container restarted in place
        (`kubectl logs -p`: pods/log `previous=true`). NotFound when the pod is gone (its log with
        it) or, with `previous`, when its container never restarted."""
        ...

    async def last_lines(self, job: str, ranks: Collection[int], count: int = 2) -> list[LogLine]:
        """The last `count` lines each of these ranks printed (its newest pod's), read once: what
        ranks whose logs are not followed said last (which rank of a hung group stopped)."""
        ...

    async def pod_usage(self, job: str | None = None,
                        ranks: Collection[int] | None = None) -> dict[str, PodUsage] | None:
        """CPU and memory of a job's pods now (of `ranks` only, when given), by pod name, from
        metrics.k8s.io (`kubectl top pod`); None when the cluster serves no metrics (no
        metrics-server). Not watchable: callers read it again every few seconds, as kubectl top
        and k9s do."""
        ...

    async def kill_pod(self, name: str) -> None:
        """Fault injection: the pod dies at once (SIGKILL locally, delete with grace 0 on kube).
        NotFound if there is no such running pod."""
        ...

    async def freeze_pod(self, name: str, frozen: bool) -> None:
        """Fault injection where `capabilities.freezes_pods`: stop (or continue) every process of a
        running pod, as a frozen machine leaves a rank (Running, silent). NotFound if there is no
        such pod; ClusterError if it is not running or the cluster cannot freeze."""
        ...

    async def slow_pod(self, name: str, factor: float) -> None:
        """Fault injection where `capabilities.slows_pods`: run a running pod's processes at
        `factor` (0 < factor <= 1; 1 undoes it) of their speed, a straggler. NotFound if there is
        no such pod; ClusterError if it is not running, the factor is out of range or the cluster
        cannot slow a pod."""
        ...

    async def wait_job(self, name: str, until: frozenset[JobPhase], timeout: float) -> JobSummary:
        """Return the job once its phase is in `until`; Timeout after `timeout` seconds.
        A job that finishes in a phase not in `until` is returned too (callers check)."""
        ...

    async def volumes(self) -> list[VolumeInfo]: ...

    async def wait_volume(self, volume: str, timeout: float) -> None:
        """Return once the volume's claim is Bound (a new claim's provisioner is at work); Timeout
        after `timeout` seconds, NotFound if there is no such claim."""
        ...

    async def checkpoints(self, volume: str) -> list[Checkpoint]:
        """Checkpoint files on a volume, read by a separate reader (never the workers)."""
        ...

    async def snapshot(self, volume: str, name: str) -> Snapshot: ...

    async def snapshots(self) -> list[Snapshot]: ...

    async def read_metrics(self, volume: str | None = None, snapshot: str | None = None) -> list[RunMetrics]:
        """metrics.json of every run on a volume or in a snapshot."""
        ...

    async def run_records(self, volume: str, run: str) -> list[tuple[float, str]]:
        """(time, line) of every line the workers of the run in directory `run` (a job's
        `run_dirs`) recorded on `volume` (training/run_record.py): every group's, also those whose
        pods are gone; [] when nothing was recorded there."""
        ...

    async def preflight(self) -> list[Check]:
        """Is the platform ready for the lesson: controller, runtime, pipelines, snapshots."""
        ...

    async def close(self) -> None: ...
