"""A job measured as its platform has it now, read through the Cluster protocol: its goodput,
whether its group hangs, and how much of its restart budget is used."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from backend.goodput.model import Goodput
from backend.goodput.report import GoodputReport
from backend.hangs import Hang, HangRule, HangWatch
from backend.models import JobSummary, LogLine
from training.logfmt import parse_line


@dataclass(frozen=True)
class JobMeasure:
    summary: JobSummary
    goodput: GoodputReport
    hang: Hang | None  # only for a job that has not ended
    rule: HangRule

    @property
    def restarts_left(self) -> int:
        """Restarts the failure policy still allows (JobSet's own count against maxRestarts)."""
        return max(0, self.summary.max_restarts - self.summary.restart_attempt)

    def budget_line(self) -> str:
        s = self.summary
        line = f"restart budget: {s.restart_attempt} of {s.max_restarts} used"
        if not s.phase.finished and s.max_restarts and self.restarts_left <= 1:
            line += (" - the next failure ends the job" if self.restarts_left == 0
                     else " - one restart left: the failure after next ends the job")
        return line


async def measure_job(cluster, job: str, rule: HangRule | None = None) -> JobMeasure:
    """NotFound for a job that does not exist; an unfinished job is measured up to now.

    Its lines come from the run's record on its volume (training/run_record.py), which holds
    every group's, as the anchor reads its durable log; a job with no record there (no volume, a
    training program that does not record) is read from its pods' logs, where restarted groups'
    pods and logs are gone: those are counted in `attempts_unseen`, their time in start-up. The
    cockpit, which follows a job live, sees every group either way."""
    rule = rule or HangRule()
    summary = await cluster.get_job(job)  # NotFound at once, before any stream opens
    model = Goodput(started=summary.created)
    watch = HangWatch(rule)
    for pod in await cluster.list_pods(job):
        model.observe_pod(pod)
        watch.pod(pod)
    recorded = []
    for volume, run in summary.run_dirs:
        recorded += [(at, line) for at, line in await cluster.run_records(volume, run)
                     if at >= summary.created - 1.0]  # an earlier job's run in the same directory is not its
    if recorded:
        batches = [[LogLine.parsed("", _rank(line), at, line) for at, line in sorted(recorded)]]
    else:
        batches = [batch async for batch in cluster.stream_logs(job, follow=False)]
    for batch in batches:
        model.feed_lines(batch)
        watch.lines(batch)
    now = time.time()
    if summary.finished is not None:
        model.finish(summary.finished)
    report = model.report(now=None if summary.finished is not None else now)
    report = replace(report, attempts_unseen=max(0, summary.restart_attempt - report.restarts))
    return JobMeasure(summary, report, None if summary.phase.finished else watch.check(now), rule)


def _rank(line: str) -> int:
    """A recorded line's rank (the record keeps lines, not pods): its `rank=` field."""
    rank = parse_line(line).get("rank", "0")
    return int(rank) if rank.lstrip("-").isdigit() else 0
