"""A job's pods as `KubeCluster` lists, watches and kills them. A TrainJob's pods carry JobSet's job
label; a RayJob's carry KubeRay's labels, its Ray cluster's found by the cluster's name
(rayjobs.pod_selectors). A pod watch is the pods' state alone, one stream for all of a job's pods
however many: what the workers print (their steps) is the log stream's (job_logs.py), which reads
only the pods its caller looks at.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import AsyncIterator

from backend.cluster import ClusterError, NotFound
from backend.kube.logs import LogFollowers, PodLog
from backend.kube.pods import has_started, log_container, pod_from
from backend.kube.threads import iterate_in_thread
from backend.kube.rayjobs import cluster_name, pod_selectors, summarize_rayjob
from backend.kube.resources import Resources
from backend.kube.watcher import object_key
from backend.kube.watches import Watches
from backend.models import FREEZE_ANNOTATION, LABEL_JOB, SLOW_ANNOTATION, LogLine, Pod, PodEvent, PodEventType


def _job_selector(job: str | None) -> str:
    return f"{LABEL_JOB}={job}" if job else LABEL_JOB


class PodOps:
    def __init__(self, resources: Resources, watches: Watches, log_read_timeout: float) -> None:
        self.resources = resources
        self.watches = watches
        self.log_read_timeout = log_read_timeout

    def followers(self, queue: asyncio.Queue) -> LogFollowers:
        """Log followers that put their pods' lines on `queue` (close them when done)."""
        return LogFollowers(self.resources.conn, queue, self.log_read_timeout)

    async def selectors(self, job: str | None, wait: bool = False) -> list[str]:
        """Label selectors whose union is a job's pods (every TrainJob's for None). A RayJob's
        pods carry KubeRay's labels; its Ray cluster's are found by the cluster's name, which
        KubeRay writes on its first reconcile: `wait` for it (on the RayJob's watch)."""
        if job is None or await self.resources.find("TrainJob", job) is not None:
            return [_job_selector(job)]
        rayjob = await self.resources.find("RayJob", job)
        if rayjob is None:
            return [_job_selector(job)]
        if wait and not cluster_name(rayjob):
            async with aclosing(self.watches.watch("RayJob", field_selector=f"metadata.name={job}")) as events:
                async for event in events:
                    if event.type == "DELETED":
                        raise NotFound(f"RayJob {job} was deleted")
                    if event.type != "SYNCED" and (cluster_name(event.object)
                                                   or summarize_rayjob(event.object).phase.finished):
                        rayjob = event.object
                        break
        return pod_selectors(rayjob)

    async def raw(self, selectors: list[str]) -> list[dict]:
        """The pods (as the API server sends them) the union of `selectors` matches."""
        found: dict[str, dict] = {}
        for selector in selectors:
            for raw in await self.resources.list("Pod", label_selector=selector):
                found[object_key(raw)] = raw
        return list(found.values())

    async def list_all(self, job: str | None = None) -> list[Pod]:
        pods = [pod_from(p, job=job or "") for p in await self.raw(await self.selectors(job))]
        return sorted(pods, key=lambda p: (p.job, p.restart_attempt, p.rank, p.name))

    async def watch(self, job: str | None = None) -> AsyncIterator[PodEvent]:
        """Pod events from the watch (the listed pods first, as ADDED)."""
        selectors = await self.selectors(job, wait=True)
        async with aclosing(self.watches.pods(selectors)) as events:
            async for item in events:
                if item.type == "SYNCED":
                    continue
                deleted = item.type == "DELETED"
                yield PodEvent(type=PodEventType(item.type), pod=pod_from(item.object, deleted=deleted, job=job or ""))

    async def freeze(self, name: str, frozen: bool) -> None:
        """Ask the pod's kubelet to stop (or continue) its processes: FREEZE_ANNOTATION, by a
        merge patch; only a running pod's."""
        await self._annotate_running(name, "frozen" if frozen else "thawed", FREEZE_ANNOTATION,
                                     "true" if frozen else None)

    async def slow(self, name: str, factor: float) -> None:
        """Ask the pod's kubelet to run its processes at `factor` of their speed (1: as before):
        SLOW_ANNOTATION, by a merge patch; only a running pod's."""
        await self._annotate_running(name, "slowed", SLOW_ANNOTATION, f"{factor:g}" if factor < 1 else None)

    async def _annotate_running(self, name: str, done: str, key: str, value: str | None) -> None:
        try:
            raw = await self.resources.get("Pod", name)
        except NotFound:
            raise NotFound(f"pod {name} not found in namespace {self.resources.namespace}") from None
        phase = (raw.get("status") or {}).get("phase", "Pending")
        if phase != "Running" or raw["metadata"].get("deletionTimestamp"):
            state = "being deleted" if raw["metadata"].get("deletionTimestamp") else phase
            raise ClusterError(f"pod {name} is {state}, not running: only a running pod can be {done}")
        await self.resources.patch("Pod", name, {"metadata": {"annotations": {key: value}}})

    async def kill(self, name: str) -> None:
        try:
            await self.resources.delete("Pod", name, grace_period=0)
        except NotFound:
            raise NotFound(f"pod {name} not found in namespace {self.resources.namespace}") from None

    async def log(self, name: str, previous: bool = False) -> list[LogLine]:
        """The pod's whole log, read once (Cluster.pod_log): its log container's, or the run
        before the container's restart in place."""
        try:
            raw = await self.resources.get("Pod", name)
        except NotFound:
            raise NotFound(f"pod {name} is gone from namespace {self.resources.namespace}, "
                           "and its log with it") from None
        pod = pod_from(raw)
        if previous and not pod.restarts:
            raise NotFound(f"pod {name}'s container never restarted: it has no previous log")
        if not previous and not has_started(raw):
            return []  # nothing printed yet (the API answers 400)
        producer = PodLog(self.resources.conn, name, pod.rank, follow=False, container=log_container(raw),
                          previous=previous)
        return [line async for batch in iterate_in_thread(producer, f"log-{name}") for line in batch]
