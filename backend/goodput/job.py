"""A job as its platform and its volume keep it (`JobHistory`), and measured from that now,
read through the Cluster protocol: its goodput, whether its group hangs, and how much of its
restart budget is used."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, replace

from backend.goodput.model import Goodput
from backend.goodput.report import GoodputReport
from backend.hangs import Hang, HangRule, HangWatch
from backend.models import JobSummary, LogLine, Pod
from backend.stragglers import Straggler, StragglerWatch


@dataclass(frozen=True)
class JobMeasure:
    summary: JobSummary
    goodput: GoodputReport
    hang: Hang | None  # only for a job that has not ended
    rule: HangRule
    stragglers: tuple[Straggler, ...] = ()  # every rank named a straggler in some window, slowest first

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


@dataclass(frozen=True)
class JobHistory:
    """What the platform and the volume keep of a job, read once: the job, its pods the platform
    still lists (every attempt's that are left) and every line its ranks recorded on its volume
    (training/run_record.py: every group's, the restarted ones' too). The cockpit opening a job
    and `kfcockpit goodput` fold the same history into the same model, so they agree however
    late the cockpit opened; the cockpit then goes on with what it watches (`recorded` says
    which of the lines it then reads it has counted already)."""

    summary: JobSummary
    pods: tuple[Pod, ...]
    lines: tuple[LogLine, ...]  # in time order; empty when the job keeps no record

    def goodput(self) -> Goodput:
        """The job's goodput model with all of this folded in (not finished: live, it goes on)."""
        model = Goodput(started=self.summary.created)
        for pod in self.pods:
            model.observe_pod(pod)
        model.feed_lines(self.lines)
        return model

    def recorded(self) -> Counter[tuple[int, str]]:
        """How many times each (rank, line) is in the record: a line read again live from a pod's
        log is one of these while its count lasts (a resumed group may print a line again
        word for word; it is counted as often as it was recorded)."""
        return Counter((line.rank, line.text) for line in self.lines)


async def job_history(cluster, job: str) -> JobHistory:
    """NotFound for a job that does not exist. A record line is the job's from its creation on:
    an earlier job's run in the same directory is not its (a second's slack: API times are
    whole seconds)."""
    summary = await cluster.get_job(job)  # NotFound at once, before any stream opens
    pods = tuple(await cluster.list_pods(job))
    recorded = []
    for volume, run in summary.run_dirs:
        recorded += [(at, line) for at, line in await cluster.run_records(volume, run)
                     if at >= summary.created - 1.0]
    lines = tuple(LogLine.parsed("", 0, at, line) for at, line in sorted(recorded))
    return JobHistory(summary, pods, lines)


async def measure_job(cluster, job: str, rule: HangRule | None = None) -> JobMeasure:
    """NotFound for a job that does not exist; an unfinished job is measured up to now.

    Its lines come from the run's record on its volume (`job_history`), which holds every
    group's, as the anchor reads its durable log; a job with no record there (no volume, a
    training program that does not record) is read from its pods' logs, where restarted groups'
    pods and logs are gone: those are counted in `attempts_unseen`, their time in start-up. The
    cockpit, which folds the same history in when it opens a job, shows the same."""
    rule = rule or HangRule()
    history = await job_history(cluster, job)
    summary = history.summary
    model = history.goodput()
    watch, slow = HangWatch(rule), StragglerWatch()
    for pod in history.pods:
        watch.pod(pod)
        slow.pod(pod)
    if history.lines:
        watch.lines(history.lines)
        slow.lines(history.lines)
    else:
        async for batch in cluster.stream_logs(job, follow=False):
            model.feed_lines(batch)
            watch.lines(batch)
            slow.lines(batch)
    now = time.time()
    if summary.finished is not None:
        model.finish(summary.finished)
    report = model.report(now=None if summary.finished is not None else now)
    report = replace(report, attempts_unseen=max(0, summary.restart_attempt - report.restarts))
    return JobMeasure(summary, report, None if summary.phase.finished else watch.check(now), rule,
                      tuple(sorted(slow.named.values(), key=lambda s: s.speed)))
