"""`KubeCluster`: the Cluster protocol on Kubernetes with Kubeflow Trainer v2.3, a façade over the
parts that do the work.

Declared resources go to the API server as they are (TrainJob, TrainingRuntime, PVC,
VolumeSnapshot, KubeRay's RayJob; resources.py). Jobs (`job_ops.py`: a job is the TrainJob or else
the RayJob of that name), pods (`pod_ops.py`), nodes and Events (`nodes.py`), a job's merged logs
(`job_logs.py`) and what lies on volumes (`volume_ops.py`: checkpoints and metrics from a reader
pod, CSI VolumeSnapshots) share one `Resources` and one `Watches` (list then watch, in threads feeding asyncio).
"""

from __future__ import annotations

from typing import AsyncIterator, Collection

from backend.anatomy.model import Anatomy
from backend.cluster import Capabilities, ClusterError
from backend.kube import anatomy, preflight as setup
from backend.kube.connection import Connection
from backend.kube.job_logs import last_lines, stream_logs
from backend.kube.job_ops import JobOps
from backend.kube.logs import DEFAULT_LOG_READ_TIMEOUT
from backend.kube.metrics import pod_usage, rank_selector
from backend.kube.nodes import NodeOps
from backend.kube.pod_ops import PodOps
from backend.kube.resources import Resources
from backend.kube.volume_ops import VolumeOps
from backend.kube.watcher import DEFAULT_READ_TIMEOUT
from backend.kube.watches import Watches
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

DESCRIPTION = "the Kubernetes cluster"  # what a cluster is called that advertises nothing beside its API


class KubeCluster:
    def __init__(self, conn: Connection, kfp_host: str | None = None, *,
                 watch_read_timeout: float = DEFAULT_READ_TIMEOUT,
                 log_read_timeout: float = DEFAULT_LOG_READ_TIMEOUT,
                 reader_timeout: float = 180.0, snapshot_timeout: float = 120.0,
                 capabilities: Capabilities | None = None) -> None:
        self.conn = conn
        self.capabilities = capabilities or Capabilities(description=DESCRIPTION,
                                                         record=f"Kubernetes, namespace {conn.namespace}")
        self.resources = Resources(conn)
        self.kfp_host = kfp_host
        watches = Watches(self.resources, watch_read_timeout)
        self._jobs = JobOps(self.resources, watches)
        self._pods = PodOps(self.resources, watches, log_read_timeout)
        self._volumes = VolumeOps(self.resources, watches, reader_timeout, snapshot_timeout)
        self._nodes = NodeOps(self.resources, watches)

    @classmethod
    def from_settings(cls, settings: Settings, capabilities: Capabilities | None = None) -> "KubeCluster":
        """Reads the kubeconfig (no network yet); Unavailable in one line if it cannot. A platform
        that can revive its API server (the embedded cluster) does so when a connection lost it.
        The Pipelines endpoint is the one runs are submitted to; none where pipelines run on
        this machine with kfp.local (backend/pipelines/runs.py)."""
        conn = Connection.open(settings)
        cluster = cls(conn, capabilities=capabilities)
        conn.revive = cluster.capabilities.revive
        if not cluster.capabilities.pipelines_here:
            cluster.kfp_host = settings.kfp_host or setup.DEFAULT_KFP_HOST
        return cluster

    @property
    def namespace(self) -> str:
        return self.conn.namespace

    # ------------------------------------------------------------------ declared resources

    async def apply(self, resource) -> str:
        return await self.resources.apply(resource.to_manifest())

    async def delete(self, kind: str, name: str) -> None:
        await self.resources.delete(kind, name)

    # ------------------------------------------------------------------ jobs, pods, logs

    async def get_job(self, name: str) -> JobSummary:
        return await self._jobs.get(name)

    async def list_jobs(self) -> list[JobSummary]:
        return await self._jobs.list_all()

    def watch_jobs(self) -> AsyncIterator[JobSummary]:
        return self._jobs.summaries(None)

    async def wait_job(self, name: str, until: frozenset[JobPhase], timeout: float) -> JobSummary:
        return await self._jobs.wait(name, until, timeout)

    async def list_pods(self, job: str | None = None) -> list[Pod]:
        return await self._pods.list_all(job)

    def watch_pods(self, job: str | None = None) -> AsyncIterator[PodEvent]:
        return self._pods.watch(job)

    async def pod_usage(self, job: str | None = None,
                        ranks: Collection[int] | None = None) -> dict[str, PodUsage] | None:
        selectors = await self._pods.selectors(job)
        if ranks is not None:
            selectors = [f"{selector},{rank_selector(ranks)}" for selector in selectors]
        return await pod_usage(self.resources, selectors)

    async def kill_pod(self, name: str) -> None:
        await self._pods.kill(name)

    async def freeze_pod(self, name: str, frozen: bool) -> None:
        if not self.capabilities.freezes_pods:
            raise ClusterError(f"{self.capabilities.description} cannot freeze a pod (no kubelet here stops "
                               "a pod's processes); the hang detector works the same on a real hang")
        await self._pods.freeze(name, frozen)

    async def slow_pod(self, name: str, factor: float) -> None:
        if not 0 < factor <= 1:
            raise ClusterError(f"factor {factor:g} is out of range: a pod runs at a factor over 0 and up to 1 "
                               "of its speed (0.5: half; 1: full speed again)")
        if not self.capabilities.slows_pods:
            raise ClusterError(f"{self.capabilities.description} cannot slow a pod (no kubelet here throttles "
                               "a pod on request); the straggler detector works the same on a real slow rank")
        await self._pods.slow(name, factor)

    def stream_logs(self, job: str, follow: bool = True,
                    focus: LogFocus | None = None) -> AsyncIterator[list[LogLine]]:
        return stream_logs(self._jobs, self._pods, job, follow, focus)

    async def pod_log(self, pod: str, previous: bool = False) -> list[LogLine]:
        return await self._pods.log(pod, previous)

    async def last_lines(self, job: str, ranks: Collection[int], count: int = 2) -> list[LogLine]:
        return await last_lines(self._pods, job, ranks, count)

    async def explain(self, job: str, rank: int = 1) -> Anatomy:
        return await anatomy.explain(self.resources, job, rank)

    # ------------------------------------------------------------------ nodes and events

    def watch_nodes(self) -> AsyncIterator[NodeEvent]:
        return self._nodes.watch()

    def watch_events(self) -> AsyncIterator[ClusterEvent]:
        return self._nodes.events()

    async def list_events(self) -> list[ClusterEvent]:
        return await self._nodes.list_events()

    async def cordon_node(self, name: str, unschedulable: bool) -> None:
        await self._nodes.cordon(name, unschedulable)

    # ------------------------------------------------------------------ volumes, checkpoints, snapshots

    async def volumes(self) -> list[VolumeInfo]:
        return await self._volumes.volumes()

    async def wait_volume(self, volume: str, timeout: float) -> None:
        await self._volumes.wait_bound(volume, timeout)

    async def checkpoints(self, volume: str) -> list[Checkpoint]:
        return await self._volumes.checkpoints(volume)

    async def read_metrics(self, volume: str | None = None, snapshot: str | None = None) -> list[RunMetrics]:
        return await self._volumes.read_metrics(volume, snapshot)

    async def run_records(self, volume: str, run: str) -> list[tuple[float, str]]:
        return await self._volumes.run_records(volume, run)

    async def snapshot(self, volume: str, name: str) -> Snapshot:
        return await self._volumes.snapshot(volume, name)

    async def snapshots(self) -> list[Snapshot]:
        return await self._volumes.snapshots()

    # ------------------------------------------------------------------ setup

    async def preflight(self) -> list[Check]:
        checks = self.capabilities.checks
        own = await checks() if checks is not None else []
        return own + await setup.preflight(self.resources, self.kfp_host)

    async def close(self) -> None:
        self.conn.close()
