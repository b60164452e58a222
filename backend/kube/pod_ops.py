"""A job's pods as `KubeCluster` lists, watches and kills them. A TrainJob's pods carry JobSet's job
label; a RayJob's carry KubeRay's labels, its Ray cluster's found by the cluster's name
(rayjobs.pod_selectors). A watched pod's last step and loss come from its followed log
(logs.LogFollowers), so the pods table moves with training without polling.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import AsyncIterator

from backend.cluster import ClusterError, NotFound
from backend.kube.logs import LogFollowers
from backend.kube.pods import pod_from
from backend.kube.rayjobs import cluster_name, pod_selectors, summarize_rayjob
from backend.kube.resources import Resources
from backend.kube.threads import Ended, cancel_all, drain, pump
from backend.kube.watcher import object_key
from backend.kube.watches import Watches
from backend.models import LABEL_JOB, LogLine, Pod, PodEvent, PodEventType


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
        """Pod events from the watch, plus a MODIFIED whenever a pod's last step/loss (from its
        followed log) moves; step updates of one burst of log reads are coalesced."""
        selectors = await self.selectors(job, wait=True)
        queue: asyncio.Queue = asyncio.Queue()
        followers = self.followers(queue)
        tasks = [pump(self.watches.pods(selectors), queue, "pod")]
        pods: dict[str, Pod] = {}
        try:
            while True:
                items = await drain(queue)
                progress: dict[str, LogLine] = {}
                for tag, item in items:
                    if tag == "pod":
                        if isinstance(item, Ended):
                            raise item.error or ClusterError("the pod watch ended")
                        if item.type == "SYNCED":
                            continue
                        for event in self._progress_events(pods, progress):
                            yield event
                        deleted = item.type == "DELETED"
                        pod = pod_from(item.object, deleted=deleted, job=job or "")
                        previous = pods.pop(pod.name, None) if deleted else pods.get(pod.name)
                        if previous is not None:
                            pod = pod.model_copy(update={"last_step": previous.last_step,
                                                         "last_loss": previous.last_loss})
                        if not deleted:
                            pods[pod.name] = pod
                            followers.start(item.object)
                        yield PodEvent(type=PodEventType(item.type), pod=pod)
                    elif not isinstance(item, Ended):  # log lines; a log that ends changes nothing
                        for line in item:
                            if line.step is not None:
                                progress[line.pod] = line
                for event in self._progress_events(pods, progress):
                    yield event
        finally:
            await cancel_all(tasks)
            await followers.close()

    @staticmethod
    def _progress_events(pods: dict[str, Pod], progress: dict[str, LogLine]) -> list[PodEvent]:
        events = []
        for name, line in progress.items():
            pod = pods.get(name)
            if pod is not None and (pod.last_step, pod.last_loss) != (line.step, line.loss):
                pod = pods[name] = pod.model_copy(update={"last_step": line.step, "last_loss": line.loss})
                events.append(PodEvent(type=PodEventType.MODIFIED, pod=pod))
        progress.clear()
        return events

    async def kill(self, name: str) -> None:
        try:
            await self.resources.delete("Pod", name, grace_period=0)
        except NotFound:
            raise NotFound(f"pod {name} not found in namespace {self.resources.namespace}") from None
