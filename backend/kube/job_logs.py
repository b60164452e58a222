"""A job's log: its pods' lines merged as a person reads them (`log_merge.LogMerge`: in time order,
the ranks' lines of one step side by side), as batches.

Followed, it reads each pod from its first line as pods appear (a restarted group's too), hands
lines on once no pod can still bring an earlier one, and ends once the job has finished and every
pod's log has ended; not followed, or followed once the job has finished, it reads what every pod
printed, once, merged.

Followed with a `LogFocus`, it reads only the pods of the ranks the caller wants (rank 0 and the
ranks on its screen, say), however large the group: a thread and a connection per followed pod,
not per pod; the one pod watch still sees every pod. A pod wanted only after it started is read
from its last lines; one no longer wanted is let go. A focused stream stays open after the job
has finished, for the ranks the caller may want next, until the caller stops reading.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Collection

from backend.cluster import ClusterError
from backend.kube.job_ops import JobOps
from backend.kube.log_merge import LogMerge
from backend.kube.logs import LogFollowers, PodLog
from backend.kube.pod_ops import PodOps
from backend.kube.pods import has_started, log_container, pod_from
from backend.kube.threads import Ended, cancel_all, drain, iterate_in_thread, pump
from backend.models import LogFocus, LogLine

# Lines per batch when a whole (not followed) log is handed over.
LOG_BATCH = 5000
# Logs read at once when the last lines of many ranks are asked for (`last_lines`).
TAIL_READS = 8


async def stream_logs(jobs: JobOps, pods: PodOps, job: str, follow: bool = True,
                      focus: LogFocus | None = None) -> AsyncIterator[list[LogLine]]:
    summary = await jobs.get(job)  # NotFound before anything starts
    selectors = await pods.selectors(job, wait=follow)
    if focus is None and (not follow or summary.phase.finished):  # nothing more: read it all, merged
        async for batch in _whole_logs(pods, selectors):
            yield batch
        return
    queue: asyncio.Queue = asyncio.Queue()
    followers = pods.followers(queue)
    chosen = _Chosen(followers, focus)
    tasks = [pump(pods.watches.pods(selectors), queue, "pod"),
             pump(jobs.summaries(job), queue, "job")]
    unlisten = focus.listen(lambda: queue.put_nowait(("focus", None))) if focus is not None else None
    arriving: asyncio.Task | None = None
    finished = False
    try:
        while True:
            arriving = arriving or asyncio.ensure_future(drain(queue))
            done, _ = await asyncio.wait({arriving}, timeout=chosen.merge.wait())
            items = arriving.result() if done else []
            if done:
                arriving = None
            for tag, item in items:
                if isinstance(item, Ended):
                    if item.error is not None:
                        raise item.error
                    if tag != "log":
                        raise ClusterError(f"the {tag} watch of job {job} ended")
                elif tag == "pod" and item.type in ("ADDED", "MODIFIED"):
                    chosen.seen(item.object)
                elif tag == "pod" and item.type == "DELETED":
                    chosen.gone(item.object)
                elif tag == "job" and item.phase.finished and not finished:
                    finished = True
                    # Pods that started after the last pod event we saw: read them too.
                    for raw in await pods.raw(selectors):
                        chosen.seen(raw)
                elif tag == "focus":
                    await chosen.refocus()
                elif tag == "log":
                    chosen.merge.add(item)
            read_out = finished and followers.idle()
            batch = chosen.merge.flush() if read_out else chosen.merge.ready(followers.following())
            if batch:
                yield batch
            if read_out and focus is None:
                return
    finally:
        if unlisten is not None:
            unlisten()
        if arriving is not None:
            arriving.cancel()
        await cancel_all(tasks)
        await followers.close()


class _Chosen:
    """Which pods of the job are followed: all of them, or those of the ranks in focus."""

    def __init__(self, followers: LogFollowers, focus: LogFocus | None) -> None:
        self.followers = followers
        self.focus = focus
        self.merge = LogMerge()
        self.pods: dict[str, tuple[int, dict]] = {}  # live pod -> (rank, as last seen)
        self.passed: set[str] = set()  # pods seen started and not followed: later, from their tail

    def seen(self, raw: dict) -> None:
        name = raw["metadata"]["name"]
        rank = self.pods[name][0] if name in self.pods else _known(self.merge, raw)
        self.pods[name] = (rank, raw)
        self._follow_or_pass(name, rank, raw)

    def gone(self, raw: dict) -> None:
        name = raw["metadata"]["name"]
        self.pods.pop(name, None)  # its follower, if any, reads on to the log's end
        self.passed.discard(name)

    async def refocus(self) -> None:
        following = set(self.followers.following())
        for name, (rank, raw) in list(self.pods.items()):
            if self.focus.wants(rank):
                self._follow_or_pass(name, rank, raw)
            elif name in following:
                await self.followers.stop(name)
                self.passed.add(name)

    def _follow_or_pass(self, name: str, rank: int, raw: dict) -> None:
        if self.focus is None or self.focus.wants(rank):
            self.followers.start(raw, tail=self.focus.tail if name in self.passed else None)
        elif has_started(raw):
            self.passed.add(name)


async def last_lines(pods: PodOps, job: str, ranks: Collection[int], count: int) -> list[LogLine]:
    """The last `count` lines of the newest started pod of each of these (global) ranks, read
    once, not followed: what the ranks whose logs nobody follows said last (a hung group's: which
    one stopped). A burst of short requests, TAIL_READS at a time; a pod gone meanwhile says
    nothing. A pod of several ranks is read once, its lines tell its ranks apart (`rank=`)."""
    wanted = set(ranks)
    newest: dict[int, tuple[int, dict]] = {}  # the pod's first rank -> (attempt, the pod)
    for raw in await pods.raw(await pods.selectors(job)):
        pod = pod_from(raw)
        first = pod.ranks[0]
        if wanted.intersection(pod.ranks) and has_started(raw) \
                and pod.restart_attempt >= newest.get(first, (-1, {}))[0]:
            newest[first] = (pod.restart_attempt, raw)
    gate = asyncio.Semaphore(TAIL_READS)
    conn = pods.resources.conn

    async def read(rank: int, raw: dict) -> list[LogLine]:
        async with gate:
            producer = PodLog(conn, raw["metadata"]["name"], rank, follow=False, tail=count,
                              container=log_container(raw))
            return [line async for batch in iterate_in_thread(producer, f"tail-{rank}") for line in batch]

    found = await asyncio.gather(*(read(rank, raw) for rank, (_, raw) in sorted(newest.items())))
    return [line for lines in found for line in lines]


async def _whole_logs(pods: PodOps, selectors: list[str]) -> AsyncIterator[list[LogLine]]:
    queue: asyncio.Queue = asyncio.Queue()
    followers = pods.followers(queue)
    merge = LogMerge()
    try:
        for raw in await pods.raw(selectors):
            _known(merge, raw)
            followers.start(raw, follow=False)
        while not followers.idle() or not queue.empty():
            _, item = await queue.get()
            if isinstance(item, Ended):
                if item.error is not None:
                    raise item.error
            else:
                merge.add(item)
    finally:
        await followers.close()
    lines = merge.flush()
    for start in range(0, len(lines), LOG_BATCH):
        yield lines[start:start + LOG_BATCH]


def _known(merge: LogMerge, raw_pod: dict) -> int:
    """The merge learns a pod's rank and restart attempt (its labels) once, before its lines; the
    pod's rank."""
    pod = pod_from(raw_pod)
    merge.pod(pod.name, pod.rank, pod.restart_attempt)
    return pod.rank
