"""A scripted cluster for the cockpit's tests: the Cluster calls the cockpit makes while following
one job, answered from queues the test fills (no controller), and the cockpit on it with its clock
in the test's hands."""

from __future__ import annotations

import asyncio

from backend.cluster import Capabilities
from backend.models import JobPhase, JobSummary
from tests.tui.conftest import make_app

JOB = "gp-job"
T0 = 1_700_000_000.0  # the job's creation; every time below is an offset from it


class ScriptedCluster:
    """The Cluster calls the cockpit makes while following a job, answered from queues the test
    fills: one job listed, then its pod events and log batches as the test sends them."""

    def __init__(self, nodes: int = 2) -> None:
        self.job = JobSummary(name=JOB, phase=JobPhase.RUNNING, num_nodes=nodes, max_restarts=3, created=T0)
        self.pods: asyncio.Queue = asyncio.Queue()
        self.logs: asyncio.Queue = asyncio.Queue()
        self.jobs: asyncio.Queue = asyncio.Queue()
        self.nodes: asyncio.Queue = asyncio.Queue()  # NodeEvents
        self.events: asyncio.Queue = asyncio.Queue()  # ClusterEvents
        self.focus = None
        self.tails: list = []  # what last_lines answers (the test sets it)
        self.asked: tuple[int, ...] = ()
        self.killed: list[str] = []  # the pods kill_pod was asked to end
        self.frozen: list[tuple[str, bool]] = []  # what freeze_pod was asked
        self.cordoned: list[tuple[str, bool]] = []  # what cordon_node was asked
        self.streams = 0  # log streams opened
        self.listed: list = []  # the Pods list_pods answers (what the platform still lists)
        self.records: list[tuple[float, str]] = []  # what run_records answers (the run's record)
        self.listed_events: list = []  # the ClusterEvents list_events answers
        self.pod_logs: dict[tuple[str, bool], list] = {}  # (pod, previous) -> what pod_log answers
        self.logs_read: list[tuple[str, bool]] = []  # what pod_log was asked
        self.capabilities = Capabilities(description="the scripted cluster", record="scripted", freezes_pods=True)

    async def list_jobs(self):
        return [self.job]

    async def get_job(self, name: str):
        return self.job

    async def watch_jobs(self):
        while True:
            yield await self.jobs.get()

    async def watch_nodes(self):
        while True:
            yield await self.nodes.get()

    async def watch_events(self):
        while True:
            yield await self.events.get()

    async def cordon_node(self, name: str, unschedulable: bool) -> None:
        self.cordoned.append((name, unschedulable))

    async def watch_pods(self, job: str):
        while True:
            yield await self.pods.get()

    async def stream_logs(self, job: str, follow: bool = True, focus=None):
        self.focus = focus  # whose lines the test should send, as a real stream reads only those
        self.streams += 1
        while True:
            yield await self.logs.get()

    async def list_pods(self, job: str):
        return list(self.listed)

    async def run_records(self, volume: str, run: str):
        return list(self.records)

    async def list_events(self):
        return list(self.listed_events)

    async def pod_log(self, pod: str, previous: bool = False):
        from backend.errors import NotFound

        self.logs_read.append((pod, previous))
        if (pod, previous) not in self.pod_logs:
            raise NotFound(f"pod {pod} is gone from namespace default, and its log with it")
        return list(self.pod_logs[(pod, previous)])

    async def last_lines(self, job: str, ranks, count: int = 2):
        self.asked = tuple(ranks)
        return [line for line in self.tails if line.rank in self.asked]

    async def kill_pod(self, name: str) -> None:
        self.killed.append(name)

    async def freeze_pod(self, name: str, frozen: bool) -> None:
        self.frozen.append((name, frozen))

    async def pod_usage(self, job: str, ranks=None):
        return None  # no metrics-server

    async def volumes(self):
        return []

    async def snapshots(self):
        return []

    async def close(self) -> None:
        pass


def scripted_app(home, nodes: int = 2):
    """The cockpit on a scripted cluster, its clock in the test's hands (`now[0]`)."""
    now = [T0]
    app = make_app(home, clock=lambda: now[0])
    app.animation_level = "none"
    cluster = ScriptedCluster(nodes)

    async def open_cluster() -> None:
        app.session.cluster = cluster

    app.session.open_cluster = open_cluster
    return app, cluster, now
