"""Goodput of a training job, from its workers' log lines: what share of the wall time became
training progress that was kept, and where the rest went.

The definitions are those of Google's ml-goodput-measurement, read off the job's own timeline
(the `training.logfmt` lines every worker prints; no torch, no platform). Every second between
the job's start and its end falls in exactly one part, so the parts add up to the wall time:

- **productive**: the time between consecutive step lines of a step that was kept, minus the time
  the loop waited on a checkpoint inside it;
- **lost work**: the same for steps a later attempt did again (done after the checkpoint the next
  attempt resumed from), plus the interrupted step between the last step line and the failure;
- **recovery**: from the failure being seen to the first step of the next attempt: teardown (the
  survivors' save), scheduling, start, rendezvous, checkpoint load, that first step's compute;
- **checkpoint stall**: what the loop waited on saves (`ckpt_wait=` on the step line after a
  save, and on `event=done` for the final save);
- **start-up**: from the job's start to its first step ever (pods, imports, rendezvous, the
  first step, whose compute includes one-time set-up);
- **other**: the rest: after the last step (exit, a job that failed), or, live, the time since
  the last step line.

A failure is seen at the earliest of: a failure reported with `failure(t)` (a pod that died, a
kill), a survivor's save after a peer failure or SIGTERM (its line time minus the save's
seconds), else the last step line of the attempt that failed (as Google's "infrastructure recovery
from disruption", which runs from the last step before it).

Attempts are told apart from `event=start` lines as `raytrain.groups` does (a rank that already
started in the current group starts a new one), so it holds for any launcher: the embedded
cluster's pods, torchrun's own restarts, Ray Train's groups. `Goodput` takes lines as they come
(`feed`), so the cockpit can show it live: `report(now)` is cheap whenever asked.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import asdict, dataclass, field, replace
from typing import Iterable, Protocol, Sequence

from backend.raytrain.groups import WorkerGroups
from training.logfmt import parse_line

PARTS = ("productive", "lost_work", "recovery", "checkpoint_stall", "startup", "other")
LABELS = {"productive": "productive", "lost_work": "lost work", "recovery": "recovery",
          "checkpoint_stall": "checkpoint stall", "startup": "start-up", "other": "other"}
SURVIVOR_SAVES = ("peer_failure", "sigterm")


class TimedLine(Protocol):
    """What `feed_lines` reads of a line: a `backend.models.LogLine` has it."""

    time: float
    text: str


class StepLine(Protocol):
    """What `feed_steps` reads of a parsed step line: a `backend.models.LogLine` has it."""

    time: float
    step: int


@dataclass
class _Attempt:
    """One worker group: its steps' first line times and the running sums over them."""

    started: float
    first_step: int | None = None  # the step number of its first step line
    times: list[float] = field(default_factory=list)  # times[i]: step first_step + i
    stalls: list[float] = field(default_factory=list)  # ckpt_wait inside step first_step + i
    # run_work[i]: productive seconds of steps first_step+1 .. first_step+i (the first step of an
    # attempt is start-up or recovery); run_stall likewise for checkpoint stalls
    run_work: list[float] = field(default_factory=lambda: [0.0])
    run_stall: list[float] = field(default_factory=lambda: [0.0])
    resumed_from: int | None = None
    failure_seen: float | None = None
    done: float | None = None  # its event=done line
    done_wait: float = 0.0

    @property
    def last_step(self) -> int | None:
        return None if self.first_step is None else self.first_step + len(self.times) - 1

    @property
    def start_point(self) -> int | None:
        """The step this attempt's work continues from (what it kept of earlier attempts)."""
        if self.resumed_from is not None:
            return self.resumed_from
        return None if self.first_step is None else self.first_step - 1

    def add_step(self, step: int, at: float, stall: float) -> None:
        last = self.last_step
        if last is None:
            self.first_step, self.times, self.stalls = step, [at], [stall]
            return
        if step <= last:  # another rank's line for a step seen: the earliest time counts
            index = step - self.first_step
            self.stalls[index] = max(self.stalls[index], stall)
            if index == len(self.times) - 1 and len(self.times) > 1 and stall > 0:
                self._redo_last_sums()
            return
        # Steps missing in between (lines not seen) share the interval with the one that arrived.
        for _ in range(last + 1, step):
            self._append(at, 0.0)
        self._append(at, stall)

    def _append(self, at: float, stall: float) -> None:
        interval = max(0.0, at - self.times[-1])
        stall = min(stall, interval)
        self.times.append(at)
        self.stalls.append(stall)
        self.run_work.append(self.run_work[-1] + interval - stall)
        self.run_stall.append(self.run_stall[-1] + stall)

    def _redo_last_sums(self) -> None:
        interval = max(0.0, self.times[-1] - self.times[-2])
        stall = min(self.stalls[-1], interval)
        self.run_work[-1] = self.run_work[-2] + interval - stall
        self.run_stall[-1] = self.run_stall[-2] + stall

    def sums_up_to(self, step: int) -> tuple[float, float]:
        """(productive, stall) seconds of this attempt's steps up to and including `step`."""
        index = min(max(step - self.first_step, 0), len(self.times) - 1)
        return self.run_work[index], self.run_stall[index]


@dataclass(frozen=True)
class GoodputReport:
    """A job's wall time split into parts (seconds; they add up to `total`), with counts."""

    start: float
    end: float
    productive: float = 0.0
    lost_work: float = 0.0
    recovery: float = 0.0
    checkpoint_stall: float = 0.0
    startup: float = 0.0
    other: float = 0.0
    steps_kept: int = 0  # the newest step the job's progress holds
    steps_lost: int = 0  # steps done again after a restart
    restarts: int = 0
    saves: int = 0  # periodic checkpoints
    # Restarts the platform counts whose attempts' logs are gone: a restarted group's pods are
    # deleted, their logs with them (JobSet recreates its Jobs), so only a live follow sees them.
    attempts_unseen: int = 0
    step_seconds: float = 0.0  # mean time of a kept step (the first step of each attempt aside)
    finished: bool = False

    @property
    def total(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def goodput(self) -> float:
        return self.productive / self.total if self.total > 0 else 0.0

    @property
    def stall_per_save(self) -> float:
        return self.checkpoint_stall / self.saves if self.saves else 0.0

    def parts(self) -> list[tuple[str, float]]:
        return [(name, getattr(self, name)) for name in PARTS]

    def as_dict(self) -> dict:
        return dict(asdict(self), total=self.total, goodput=self.goodput,
                    stall_per_save=self.stall_per_save)

    def one_line(self) -> str:
        """`goodput 0.93 of 61.2s: productive 57.0s, lost work 0.4s (3 steps), ...`"""
        counts = {"lost_work": f" ({self.steps_lost} steps)" if self.steps_lost else "",
                  "recovery": f" ({self.restarts} restarts)" if self.restarts else "",
                  "checkpoint_stall": f" ({self.saves} saves)" if self.saves else ""}
        parts = ", ".join(f"{LABELS[name]} {seconds:.1f}s{counts.get(name, '')}"
                          for name, seconds in self.parts() if seconds >= 0.05 or name == "productive")
        return f"goodput {self.goodput:.2f} of {self.total:.1f}s: {parts}"


class Goodput:
    """A job's goodput, updated line by line.

        g = Goodput(started=job.created)
        for line in lines: g.feed(line.time, line.text)
        g.report()            # as of the newest line, or report(now=time.time()) live
    """

    def __init__(self, started: float | None = None):
        self.started = started
        self.attempts: list[_Attempt] = []
        self._groups = WorkerGroups()
        self._failures: list[float] = []  # reported by the caller, sorted
        self._failed_pods: set[str] = set()
        self._newest = started
        self._finished: float | None = None
        self._saves = 0

    # ------------------------------------------------------------------ input

    def feed_lines(self, lines: Iterable[TimedLine]) -> None:
        for line in lines:
            self.feed(line.time, line.text)

    def feed(self, at: float, text: str) -> None:
        if "=" not in text:
            return
        fields = parse_line(text)
        self._seen(at)
        event = fields.get("event")
        if event == "start" and "rank" in fields:
            try:
                rank, pid = int(fields["rank"]), int(fields.get("pid", "0"))
            except ValueError:
                return
            if self._groups.started(rank, pid) or not self.attempts:
                self.attempts.append(_Attempt(started=at))
            return
        if "step" in fields and "loss" in fields and event is None:
            try:
                step, stall = int(fields["step"]), float(fields.get("ckpt_wait", 0.0))
            except ValueError:
                return
            self._current(at).add_step(step, at, stall)
        elif event == "resumed":
            attempt = self._current(at)
            if attempt.resumed_from is None and fields.get("from_step", "").isdigit():
                attempt.resumed_from = int(fields["from_step"])
        elif event == "checkpoint_saved":
            if fields.get("reason") == "periodic":
                self._saves += 1
            elif fields.get("reason") in SURVIVOR_SAVES:
                self._survivor_saved(at - _number(fields.get("seconds")))
        elif event == "done":
            attempt = self._current(at)
            if attempt.done is None:
                attempt.done, attempt.done_wait = at, _number(fields.get("ckpt_wait"))

    def feed_steps(self, lines: Sequence[StepLine]) -> None:
        """Plain training-step lines their reader already parsed (no event=, no ckpt_wait=), in
        order: what `feed` would do with each, without parsing them again, the attempt and the
        newest time found once per run of them (the cockpit's hot path: 100k lines a second)."""
        if not lines:
            return
        self._seen(lines[0].time)
        self._seen(max(line.time for line in lines))
        attempt = self._current(lines[0].time)  # only a start line opens another attempt
        for line in lines:
            first = attempt.first_step
            # Another rank's line for a step seen (most lines) adds nothing without a stall.
            if first is None or line.step >= first + len(attempt.times):
                attempt.add_step(line.step, line.time, 0.0)

    def _seen(self, at: float) -> None:
        self._newest = at if self._newest is None else max(self._newest, at)
        if self.started is None:
            self.started = at

    def failure(self, at: float) -> None:
        """A worker failed at `at` (a pod that died, a kill): where recovery starts."""
        self._failures.insert(bisect_right(self._failures, at), at)
        self._newest = at if self._newest is None else max(self._newest, at)

    def observe_pod(self, pod) -> None:
        """A pod as listed or watched (`backend.models.Pod`): one that failed is a failure at
        its finished time (each pod once, however often it is seen)."""
        if pod.phase == "Failed" and pod.finished is not None and pod.name not in self._failed_pods:
            self._failed_pods.add(pod.name)
            self.failure(pod.finished)

    def finish(self, at: float) -> None:
        """The job ended at `at` (its finished time); without it, the newest line ends it. Never
        before its newest line: Kubernetes keeps times to the second, lines to the microsecond."""
        self._newest = at if self._newest is None else max(self._newest, at)
        self._finished = self._newest

    def _current(self, at: float) -> _Attempt:
        if not self.attempts:  # lines without a start line (a log read from the middle)
            self.attempts.append(_Attempt(started=at))
        return self.attempts[-1]

    def _survivor_saved(self, began: float) -> None:
        attempt = self._current(began)
        if attempt.failure_seen is None or began < attempt.failure_seen:
            attempt.failure_seen = began

    # ------------------------------------------------------------------ the figures

    def report(self, now: float | None = None) -> GoodputReport:
        """The parts from the job's start to its end (finish(), else the newest line, else `now`)."""
        start = self.started
        if start is None:
            return GoodputReport(start=now or 0.0, end=now or 0.0)
        end = self._finished if self._finished is not None else max(self._newest or start, now or start)
        parts = dict.fromkeys(PARTS, 0.0)
        steps_lost = timed = 0
        progress_at = failure_at = None  # the newest step line so far; the failure seen after it
        for index, attempt in enumerate(self.attempts):
            if attempt.first_step is None:  # a group that failed before its first step
                continue
            if progress_at is None:
                parts["startup"] += attempt.times[0] - start
            else:
                self._recovery(parts, progress_at, failure_at, attempt.times[0])
            # Its steps after the point the next attempt continued from were done again.
            kept_to = attempt.last_step
            for following in self.attempts[index + 1:]:
                if following.start_point is not None:
                    kept_to = min(kept_to, following.start_point)
                    break
            work, stall = attempt.sums_up_to(attempt.last_step)
            kept_work = attempt.sums_up_to(kept_to)[0] if kept_to >= attempt.first_step else 0.0
            parts["productive"] += kept_work
            parts["lost_work"] += work - kept_work
            parts["checkpoint_stall"] += stall
            steps_lost += attempt.last_step - max(kept_to, attempt.first_step - 1)
            timed += max(0, kept_to - attempt.first_step)
            progress_at = attempt.times[-1]
            failure_at = self._failure_after(attempt)
        last = self.attempts[-1] if self.attempts else None
        if progress_at is None:
            parts["startup"] = end - start
        elif last.first_step is None or (failure_at is not None and last.done is None):
            self._recovery(parts, progress_at, failure_at, end)  # recovering, or never came back
        else:  # the last group's end: its final save, then exit (or, live, the step in flight)
            tail = max(0.0, end - progress_at)
            stall = min(last.done_wait, tail) if last.done is not None else 0.0
            parts["checkpoint_stall"] += stall
            parts["other"] += tail - stall
        kept = next((a.last_step for a in reversed(self.attempts) if a.first_step is not None), 0)
        return GoodputReport(
            start=start, end=end, steps_kept=kept, steps_lost=steps_lost,
            restarts=max(0, len(self.attempts) - 1), saves=self._saves,
            step_seconds=parts["productive"] / timed if timed else 0.0,
            finished=self._finished is not None or (last is not None and last.done is not None),
            **{name: max(0.0, seconds) for name, seconds in parts.items()})

    @staticmethod
    def _recovery(parts: dict[str, float], progress_at: float, failure_at: float | None, until: float) -> None:
        """From the last step line to `until`: the interrupted step's work is lost up to the
        failure, and recovery from there."""
        seen = progress_at if failure_at is None else min(max(failure_at, progress_at), until)
        parts["lost_work"] += seen - progress_at
        parts["recovery"] += until - seen

    def _failure_after(self, attempt: _Attempt) -> float | None:
        """When the failure that ended `attempt` was seen: the earliest hint since it started.
        Any failure ends a group (the whole group restarts), and a step may still print after
        the kill when its collective had already finished: that step is kept, recovery starts
        at its line (the search once began there, missed such a kill and took the next one)."""
        index = bisect_right(self._failures, attempt.started)
        hinted = self._failures[index] if index < len(self._failures) else None
        seen = [t for t in (hinted, attempt.failure_seen) if t is not None]
        return min(seen) if seen else None


def _number(text: str | None) -> float:
    try:
        return float(text) if text else 0.0
    except ValueError:
        return 0.0


def goodput_of(lines: Iterable[TimedLine], started: float | None = None, finished: float | None = None,
               failures: Iterable[float] = ()) -> GoodputReport:
    """The report of a finished job's lines (merged, any order of ranks)."""
    model = Goodput(started)
    for at in failures:
        model.failure(at)
    model.feed_lines(lines)
    if finished is not None:
        model.finish(finished)
    return model.report()


async def job_goodput(cluster, job: str) -> tuple[object, GoodputReport]:
    """(JobSummary, report) of a job as its platform has it now, read through the Cluster
    protocol: its merged logs from the start, its pods' failures, its created/finished times.
    NotFound for a job that does not exist. For an unfinished job, the report runs to now.
    Restarted groups whose pods (and logs) are gone are counted in `attempts_unseen`: their time
    falls into start-up; the cockpit, which follows a job live, sees them whole."""
    import time

    summary = await cluster.get_job(job)  # NotFound at once, before any stream opens
    model = Goodput(started=summary.created)
    for pod in await cluster.list_pods(job):
        model.observe_pod(pod)
    async for batch in cluster.stream_logs(job, follow=False):
        model.feed_lines(batch)
    if summary.finished is not None:
        model.finish(summary.finished)
    report = model.report(now=None if summary.finished is not None else time.time())
    return summary, replace(report, attempts_unseen=max(0, summary.restart_attempt - report.restarts))
