"""Jobs as `KubeCluster` reads and follows them: a job is the TrainJob of a name, or else the
RayJob of that name (one namespace of job names, as on the embedded cluster). A TrainJob's summary
also reads its JobSet (jobs.summarize), a RayJob's its own status (rayjobs.summarize_rayjob); on a
cluster without KubeRay there are simply no RayJobs.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from backend.cluster import ClusterError, NotFound, Timeout
from backend.kube.connection import MissingType
from backend.kube.jobs import summarize
from backend.kube.rayjobs import summarize_rayjob
from backend.kube.resources import Resources
from backend.kube.threads import Ended, cancel_all, pump
from backend.kube.watches import Watches
from backend.kube.watcher import WatchEvent
from backend.models import JobPhase, JobSummary

JOB_KINDS = ("TrainJob", "RayJob")  # a TrainJob's summary also reads its JobSet


class JobOps:
    def __init__(self, resources: Resources, watches: Watches) -> None:
        self.resources = resources
        self.watches = watches

    async def get(self, name: str) -> JobSummary:
        try:
            trainjob = await self.resources.get("TrainJob", name)
        except NotFound as missing:
            rayjob = await self.resources.find("RayJob", name)  # None too without KubeRay
            if rayjob is None:
                raise missing from None
            return summarize_rayjob(rayjob)
        return summarize(trainjob, await self.resources.find("JobSet", name))

    async def list_all(self) -> list[JobSummary]:
        trainjobs, jobsets, rayjobs = await asyncio.gather(
            self.resources.list("TrainJob"), self.resources.list("JobSet"), self._rayjobs())
        by_name = {j["metadata"]["name"]: j for j in jobsets}
        summaries = [summarize(t, by_name.get(t["metadata"]["name"])) for t in trainjobs]
        names = {s.name for s in summaries}
        summaries += [summarize_rayjob(r) for r in rayjobs if r["metadata"]["name"] not in names]
        return sorted(summaries, key=lambda s: (s.created, s.name))

    async def _rayjobs(self) -> list[dict]:
        """Every RayJob; none on a cluster without KubeRay."""
        try:
            return await self.resources.list("RayJob")
        except MissingType:
            return []

    async def summaries(self, name: str | None) -> AsyncIterator[JobSummary]:
        """Summaries from a TrainJob, a JobSet (same names) and a RayJob watch: all once every
        watch has listed, then a job's again when its phase, restart attempt or reported progress
        changes. On a
        cluster without KubeRay the RayJob watch ends at once (MissingType): no RayJobs."""
        selector = f"metadata.name={name}" if name else None
        kinds = ("TrainJob", "JobSet", "RayJob")
        queue: asyncio.Queue = asyncio.Queue()
        tasks = [pump(self.watches.watch(kind, field_selector=selector), queue, kind) for kind in kinds]
        objects: dict[str, dict[str, dict]] = {kind: {} for kind in kinds}
        synced: set[str] = set()
        shown: dict[str, tuple] = {}

        def jobs() -> list[str]:
            return list(objects["TrainJob"]) + [k for k in objects["RayJob"] if k not in objects["TrainJob"]]

        try:
            while True:
                tag, item = await queue.get()
                if isinstance(item, Ended) and not (tag == "RayJob" and isinstance(item.error, MissingType)):
                    raise item.error or ClusterError(f"the {tag} watch ended")
                if isinstance(item, Ended) or item.type == "SYNCED":  # no KubeRay: nothing to list
                    synced.add(tag)
                    changed = jobs() if len(synced) == len(kinds) else []
                else:
                    event: WatchEvent = item
                    key = event.object["metadata"]["name"]
                    if event.type == "DELETED":
                        objects[tag].pop(key, None)
                        if tag in JOB_KINDS:
                            shown.pop(key, None)
                            if name:
                                raise NotFound(f"{tag} {name} was deleted")
                    else:
                        objects[tag][key] = event.object
                    changed = [key] if len(synced) == len(kinds) and key in jobs() else []
                for key in changed:
                    if key in objects["TrainJob"]:
                        summary = summarize(objects["TrainJob"][key], objects["JobSet"].get(key))
                    else:
                        summary = summarize_rayjob(objects["RayJob"][key])
                    state = (summary.phase, summary.restart_attempt, summary.progress, summary.group_uid)
                    if shown.get(key) != state:
                        shown[key] = state
                        yield summary
        finally:
            await cancel_all(tasks)

    async def wait(self, name: str, until: frozenset[JobPhase], timeout: float) -> JobSummary:
        last = await self.get(name)
        kind = "RayJob" if last.launcher == "ray" else "TrainJob"
        try:
            async with asyncio.timeout(timeout):
                async for summary in self.summaries(name):
                    last = summary
                    if summary.phase in until or summary.phase.finished:
                        return summary
        except TimeoutError:
            wanted = " or ".join(sorted(p.value for p in until))
            raise Timeout(f"{kind} {name} is still {last.phase.value} after {timeout:.0f}s "
                          f"(waited for {wanted})") from None
        raise ClusterError(f"the watch of {kind} {name} ended")
