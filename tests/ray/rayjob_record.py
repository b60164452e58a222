"""What the cluster showed of the comparison's RayJob (manifests/rayjob.yaml running the plan), for
the tests of a RayJob's life on the embedded cluster: its pods' and its summaries' every change,
recorded while the comparison ran; its status as KubeRay writes it; the apply repeated; then the
delete with a pod watch open. It shares the comparison's Ray run: Ray starts slowly on two cores,
and a run of its own cost about a minute of CPU."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator

from backend.cluster import Cluster, NotFound
from backend.local.node.podspec import ENV_POD
from backend.models import DRIVER_RANK, JobSummary, Pod, PodEvent, PodEventType, RayJob
from backend.processes import marked_processes
from tests.local.conftest import WAIT


@dataclass
class RayJobRecord:
    job: str = ""  # the RayJob's name, once it showed
    pod_events: list[PodEvent] = field(default_factory=list)  # from a watch of the RayJob's pods
    summaries: list[JobSummary] = field(default_factory=list)  # every job's
    status: dict = field(default_factory=dict)  # the RayJob's, as stored
    final_pods: list[Pod] = field(default_factory=list)
    left_running: list[int] = field(default_factory=list)  # the driver pod's processes after the end
    jobs: dict[str, JobSummary] = field(default_factory=dict)  # both sides' jobs at the end
    applied_again: str = ""
    gone: set[str] = field(default_factory=set)  # pods the watch saw deleted after the RayJob was
    after_delete: Exception | None = None
    listed_after_delete: list[JobSummary] = field(default_factory=list)

    def phases(self) -> list[JobSummary]:
        return [j for j in self.summaries if j.name == self.job]

    def driver(self) -> Pod:
        return next(p for p in self.final_pods if p.rank == DRIVER_RANK)

    def workers(self, attempt: int) -> dict[str, list[Pod]]:
        """Every state each worker pod of an attempt went through, by pod name."""
        seen: dict[str, list[Pod]] = defaultdict(list)
        for event in self.pod_events:
            if event.pod.rank != DRIVER_RANK and event.pod.restart_attempt == attempt:
                seen[event.pod.name].append(event.pod)
        return seen


async def driver_uid(cluster: Cluster, driver: str) -> str:
    return (await cluster.resources.get("Pod", driver))["metadata"]["uid"]


def driver_processes(uid: str) -> list[int]:
    """Live processes of a driver pod (by its uid, the node's marker): the driver, Ray's own
    processes, its workers."""
    return list(marked_processes({ENV_POD: uid}))


@asynccontextmanager
async def recording(cluster: Cluster, record: RayJobRecord) -> AsyncIterator[None]:
    """While the body runs, then until the record holds the RayJob's end and its driver's: every
    job summary, and the RayJob's pod events from a watch of its pods (list-then-watch, started
    as soon as the RayJob shows: its name is the comparison's to choose)."""
    changed = asyncio.Event()
    tasks: list[asyncio.Task] = []

    def over() -> bool:
        return any(e.pod.rank == DRIVER_RANK and e.pod.phase.finished for e in record.pod_events) \
            and any(j.phase.finished for j in record.phases())

    async def pods(job: str) -> None:
        async for event in cluster.watch_pods(job):
            record.pod_events.append(event)
            changed.set()

    async def jobs() -> None:
        async for job in cluster.watch_jobs():
            record.summaries.append(job)
            if not record.job and job.launcher == "ray":
                record.job = job.name
                tasks.append(asyncio.create_task(pods(job.name)))
            changed.set()

    tasks.append(asyncio.create_task(jobs()))
    try:
        yield

        async def until_over() -> None:
            while not over():
                changed.clear()
                await changed.wait()

        await asyncio.wait_for(until_over(), WAIT)
    finally:
        for task in tasks:
            task.cancel()


async def after_the_run(cluster: Cluster, record: RayJobRecord, applied: RayJob) -> None:
    """The finished RayJob read, applied again as it was, then deleted while a pod watch is open."""
    record.final_pods = await cluster.list_pods(record.job)
    record.left_running = driver_processes(await driver_uid(cluster, record.driver().name))
    record.status = (await cluster.resources.get("RayJob", record.job))["status"]
    record.jobs = {job.name: job for job in await cluster.list_jobs()}
    record.applied_again = await cluster.apply(applied)
    await _delete(cluster, record)


async def _delete(cluster: Cluster, record: RayJobRecord) -> None:
    remaining = {p.name for p in record.final_pods}
    seen: set[str] = set()
    # Set before the delete is sent, not after it returns: the pods' deletions may reach the
    # watch while the delete call is still returning (waiting for them then was the hang of the
    # first merged run, 0e5887d).
    listed, deleting = asyncio.Event(), asyncio.Event()

    async def watch_deletions() -> None:
        async for event in cluster.watch_pods(record.job):
            if event.type == PodEventType.DELETED:
                if deleting.is_set():
                    record.gone.add(event.pod.name)
            else:
                seen.add(event.pod.name)
            if seen >= remaining:
                listed.set()
            if deleting.is_set() and record.gone >= remaining:
                return

    watcher = asyncio.create_task(watch_deletions())
    try:
        await asyncio.wait_for(listed.wait(), WAIT)
        deleting.set()
        await cluster.delete("RayJob", record.job)
        await asyncio.wait_for(watcher, WAIT)
    finally:
        watcher.cancel()
    try:
        await cluster.get_job(record.job)
    except NotFound as exc:
        record.after_delete = exc
    record.listed_after_delete = await cluster.list_jobs()
