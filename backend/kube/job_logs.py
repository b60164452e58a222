"""A job's log: every pod's lines merged as a person reads them (`log_merge.LogMerge`: in time
order, the ranks' lines of one step side by side), as batches. Followed, it reads each pod from its
first line as pods appear (a restarted group's too), hands lines on once no pod can still bring an
earlier one, and ends once the job has finished and every pod's log has ended; not followed, or
followed once the job has finished, it reads what every pod printed, once, merged.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from backend.cluster import ClusterError
from backend.kube.job_ops import JobOps
from backend.kube.log_merge import LogMerge
from backend.kube.pod_ops import PodOps
from backend.kube.pods import pod_from
from backend.kube.threads import Ended, cancel_all, drain, pump
from backend.models import LogLine

# Lines per batch when a whole (not followed) log is handed over.
LOG_BATCH = 5000


async def stream_logs(jobs: JobOps, pods: PodOps, job: str, follow: bool = True) -> AsyncIterator[list[LogLine]]:
    summary = await jobs.get(job)  # NotFound before anything starts
    selectors = await pods.selectors(job, wait=follow)
    if not follow or summary.phase.finished:  # nothing more will be printed: read it all, merged
        async for batch in _whole_logs(pods, selectors):
            yield batch
        return
    queue: asyncio.Queue = asyncio.Queue()
    followers = pods.followers(queue)
    tasks = [pump(pods.watches.pods(selectors), queue, "pod"),
             pump(jobs.summaries(job), queue, "job")]
    merge = LogMerge()
    arriving: asyncio.Task | None = None
    finished = False
    try:
        while True:
            arriving = arriving or asyncio.ensure_future(drain(queue))
            done, _ = await asyncio.wait({arriving}, timeout=merge.wait())
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
                    _known(merge, item.object)
                    followers.start(item.object)
                elif tag == "job" and item.phase.finished and not finished:
                    finished = True
                    # Pods that started after the last pod event we saw: read them too.
                    for raw in await pods.raw(selectors):
                        _known(merge, raw)
                        followers.start(raw)
                elif tag == "log":
                    merge.add(item)
            ended = finished and followers.idle()
            batch = merge.flush() if ended else merge.ready(followers.following())
            if batch:
                yield batch
            if ended:
                return
    finally:
        if arriving is not None:
            arriving.cancel()
        await cancel_all(tasks)
        await followers.close()


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


def _known(merge: LogMerge, raw_pod: dict) -> None:
    """The merge learns a pod's rank and restart attempt (its labels) once, before its lines."""
    name = raw_pod["metadata"]["name"]
    if not merge.knows(name):
        pod = pod_from(raw_pod)
        merge.pod(name, pod.rank, pod.restart_attempt)
