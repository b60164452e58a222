"""A job's goodput as its platform has it now, read through the Cluster protocol."""

from __future__ import annotations

import time
from dataclasses import replace

from backend.goodput.model import Goodput
from backend.goodput.report import GoodputReport


async def job_goodput(cluster, job: str) -> tuple[object, GoodputReport]:
    """(JobSummary, report) of a job: NotFound for one that does not exist; an unfinished job is
    measured up to now.

    Its lines come from the run's record on its volume (training/run_record.py), which holds
    every group's, as the anchor reads its durable log; a job with no record there (no volume, a
    training program that does not record) is read from its pods' logs, where restarted groups'
    pods and logs are gone: those are counted in `attempts_unseen`, their time in start-up. The
    cockpit, which follows a job live, sees every group either way."""
    summary = await cluster.get_job(job)  # NotFound at once, before any stream opens
    model = Goodput(started=summary.created)
    for pod in await cluster.list_pods(job):
        model.observe_pod(pod)
    recorded = []
    for volume, run in summary.run_dirs:
        recorded += [(at, line) for at, line in await cluster.run_records(volume, run)
                     if at >= summary.created - 1.0]  # an earlier job's run in the same directory is not its
    if recorded:
        for at, line in sorted(recorded):
            model.feed(at, line)
    else:
        async for batch in cluster.stream_logs(job, follow=False):
            model.feed_lines(batch)
    if summary.finished is not None:
        model.finish(summary.finished)
    report = model.report(now=None if summary.finished is not None else time.time())
    return summary, replace(report, attempts_unseen=max(0, summary.restart_attempt - report.restarts))
