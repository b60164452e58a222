"""Goodput of a training job from its workers' lines, as ml-goodput-measurement defines it.

The anchor (AI-Hypercomputer/ml-goodput-measurement, src/goodput.py) splits a job into segments at
each restart and, within a segment (`_compute_adjusted_segment_productive_and_unproductive_time`,
`_compute_segment_final_metrics`):

- **productive**: every step the job kept, the segment's first step included, except the first
  step's excess over the segment's mean step time, which is **program start-up**;
- **wasted progress**: steps done after the checkpoint the next segment resumed from;
- **infrastructure recovery**: from the start of the interrupted step (our last step line) to the
  next segment's start (its group formed: `event=start`);
- **checkpoint save / restore**: what saves held the loop (`ckpt_wait=`), what loading took
  (`restore_seconds=` on `event=resumed`);
- **training prep**: a segment's start to its first step's start, less the restore;
- **other**: the rest (after the last step: exit; live, a step in flight).

Two points this project adds, each said where it is booked: a TrainJob's clock starts at its
creation, the anchor's at the program's start, so the time before the first group formed is
program start-up; and survivors save the interrupted step at teardown (the anchor's "auto
checkpointing" on a disruption), booked as checkpoint save out of the recovery it sits in.

Groups are told apart from `event=start` lines as `raytrain.groups` does, so any launcher works
(the embedded cluster, torchrun's own restarts, Ray Train). Lines are fed as they come (`feed`);
`report(now)` is cheap at any time, so the cockpit shows it live.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterable, Protocol, Sequence

from backend.goodput.attempts import Attempt
from backend.goodput.report import PARTS, GoodputReport, RestartTimes
from backend.raytrain.groups import WorkerGroups, process_of
from training.logfmt import parse_line

SURVIVOR_SAVES = ("peer_failure", "sigterm")


class TimedLine(Protocol):
    """What `feed_lines` reads of a line: a `backend.models.LogLine` has it."""

    time: float
    text: str


class StepLine(Protocol):
    """What `feed_steps` reads of a parsed step line: a `backend.models.LogLine` has it."""

    time: float
    step: int


class Goodput:
    """A job's goodput, updated line by line.

        g = Goodput(started=job.created)
        for line in lines: g.feed(line.time, line.text)
        g.report()            # as of the newest line, or report(now=time.time()) live
    """

    def __init__(self, started: float | None = None):
        self.started = started
        self.attempts: list[Attempt] = []
        self._groups = WorkerGroups()
        self._failures: list[float] = []  # reported by the caller, sorted
        self._failed_pods: set[str] = set()
        self._pods: dict[int, tuple[float, float | None]] = {}  # attempt -> (first created, last started)
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
        event = fields.get("event")
        if event is None:
            if "step" in fields and "loss" in fields:
                try:
                    step, stall = int(fields["step"]), float(fields.get("ckpt_wait", 0.0))
                except ValueError:
                    return
                self._seen(at)
                self._current(at).add_step(step, at, stall)
            return
        self._seen(at)
        if event == "start" and "rank" in fields:
            try:
                rank = int(fields["rank"])
            except ValueError:
                return
            if self._groups.started(rank, process_of(fields)) or not self.attempts:
                self.attempts.append(Attempt(started=at))
            began = _number(fields.get("process_started"))
            if began:  # the kernel's start of this rank's process: the group's is its last rank's
                attempt = self.attempts[-1]
                attempt.processes_started = max(attempt.processes_started or began, began)
        elif event == "resumed":
            attempt = self._current(at)
            attempt.resumed = at if attempt.resumed is None else min(attempt.resumed, at)
            if attempt.resumed_from is None and fields.get("from_step", "").isdigit():
                attempt.resumed_from = int(fields["from_step"])
            attempt.restore_seconds = max(attempt.restore_seconds, _number(fields.get("restore_seconds")))
        elif event == "training_started":
            attempt = self._current(at)
            if attempt.training_started is None or at < attempt.training_started:
                attempt.training_started = at
        elif event == "checkpoint_saved":
            if fields.get("reason") == "periodic":
                self._saves += 1
            elif fields.get("reason") in SURVIVOR_SAVES:
                seconds = _number(fields.get("seconds"))
                self._current(at).survivor_saved(at - seconds, at, seconds)
        elif event == "done":
            attempt = self._current(at)
            if attempt.done is None:
                attempt.done, attempt.done_wait = at, _number(fields.get("ckpt_wait"))

    def feed_steps(self, lines: Sequence[StepLine]) -> None:
        """Plain step lines their reader already parsed (no event=, no ckpt_wait=), in order: what
        `feed` would do with each, the attempt and the newest time found once per run of them
        (the cockpit's hot path: 100k lines a second)."""
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

    def failure(self, at: float) -> None:
        """A worker failed at `at` (a pod that died, a kill)."""
        self._failures.insert(bisect_right(self._failures, at), at)
        self._newest = at if self._newest is None else max(self._newest, at)

    def observe_pod(self, pod) -> None:
        """A pod as listed or watched (`backend.models.Pod`): its group's creation and start for
        the restart breakdown; one that failed is a failure at its finished time (once)."""
        if pod.rank >= 0:  # a Ray driver spans the groups; its workers are the group
            created, started = self._pods.get(pod.restart_attempt, (pod.created, None))
            if pod.started is not None:
                started = pod.started if started is None else max(started, pod.started)
            self._pods[pod.restart_attempt] = (min(created, pod.created), started)
        if pod.phase == "Failed" and pod.finished is not None and pod.name not in self._failed_pods:
            self._failed_pods.add(pod.name)
            self.failure(pod.finished)

    def finish(self, at: float) -> None:
        """The job ended at `at`; never before its newest line (Kubernetes keeps times to the
        second, lines to the microsecond)."""
        self._newest = at if self._newest is None else max(self._newest, at)
        self._finished = self._newest

    def _seen(self, at: float) -> None:
        self._newest = at if self._newest is None else max(self._newest, at)
        if self.started is None:
            self.started = at

    def _current(self, at: float) -> Attempt:
        if not self.attempts:  # lines without a start line (a log read from the middle)
            self.attempts.append(Attempt(started=at))
        return self.attempts[-1]

    # ------------------------------------------------------------------ the figures

    def report(self, now: float | None = None) -> GoodputReport:
        """The parts from the job's start to its end (finish(), else the newest line, else `now`)."""
        start = self.started
        if start is None:
            return GoodputReport(start=now or 0.0, end=now or 0.0)
        end = self._finished if self._finished is not None else max(self._newest or start, now or start)
        book = _Ledger(start, end)
        attempts = self.attempts
        stepping = [i for i, a in enumerate(attempts) if a.stepped]
        steps_lost = timed = 0
        timed_work = 0.0
        if not stepping:
            book.to("program_startup", attempts[-1].started if attempts else end)
            if attempts:
                book.split(end, {"checkpoint_restore": attempts[-1].restore_seconds}, "training_prep")
        else:
            book.to("program_startup", attempts[stepping[0]].started)
            for n, index in enumerate(stepping):
                attempt = attempts[index]
                if n:  # from the interrupted step's start to this group's start
                    before = attempts[stepping[n - 1]]
                    book.split(attempt.started, {"checkpoint_save": before.survivor_save_seconds},
                               "infrastructure_recovery")
                book.split(attempt.first_step_began, {"checkpoint_restore": attempt.restore_seconds},
                           "training_prep")
                kept_to = self._kept_to(index)
                lost, kept, work = _book_steps(book, attempt, kept_to)
                steps_lost, timed, timed_work = steps_lost + lost, timed + kept, timed_work + work
            self._book_tail(book, attempts[stepping[-1]], attempts[stepping[-1] + 1:], end)
        last = attempts[-1] if attempts else None
        kept = next((a.last_step for a in reversed(attempts) if a.stepped), 0)
        return GoodputReport(
            start=start, end=end, steps_kept=kept, steps_lost=steps_lost,
            restarts=max(0, len(attempts) - 1), saves=self._saves,
            step_seconds=timed_work / timed if timed else 0.0,
            finished=self._finished is not None or (last is not None and last.done is not None),
            restart_times=tuple(self._restart(i) for i in range(1, len(attempts))),
            **book.parts)

    def _book_tail(self, book: "_Ledger", last: Attempt, later: list[Attempt], end: float) -> None:
        """After the newest group's last step: a restart under way, a failure not yet restarted,
        or its end (the final save's wait, then exit; live, the step in flight)."""
        if later:
            book.split(later[-1].started, {"checkpoint_save": last.survivor_save_seconds}, "infrastructure_recovery")
            book.split(end, {"checkpoint_restore": later[-1].restore_seconds}, "training_prep")
        elif last.done is None and self._failure_after(last) is not None:
            book.split(end, {"checkpoint_save": last.survivor_save_seconds}, "infrastructure_recovery")
        else:
            book.split(end, {"checkpoint_save": last.done_wait if last.done is not None else 0.0}, "other")

    def _kept_to(self, index: int) -> int:
        """The newest step of group `index` the job kept: the point the next group continued from."""
        attempt = self.attempts[index]
        for following in self.attempts[index + 1:]:
            if following.start_point is not None:
                return min(attempt.last_step, following.start_point)
        return attempt.last_step

    def _failure_after(self, attempt: Attempt) -> float | None:
        """When the failure that ended `attempt` was seen: the earliest hint since it started (a
        failed pod, a kill, a survivor's save), or None."""
        index = bisect_left(self._failures, attempt.started)
        hinted = self._failures[index] if index < len(self._failures) else None
        seen = [t for t in (hinted, attempt.survivor_save_began) if t is not None]
        return min(seen) if seen else None

    def _restart(self, index: int) -> RestartTimes:
        before, attempt = self.attempts[index - 1], self.attempts[index]
        failure = self._failure_after(before)
        created, started = self._pods.get(index, (None, None))
        return RestartTimes(
            attempt=index, failure_seen=failure if failure is None else min(failure, attempt.started),
            survivors_saved=before.survivor_save_done, pods_created=created,
            pods_started=attempt.processes_started or started,  # to 10 ms where the lines say
            group_formed=attempt.started, checkpoint_loaded=attempt.resumed,
            first_step=attempt.times[0] if attempt.stepped else None)


def _book_steps(book: "_Ledger", attempt: Attempt, kept_to: int) -> tuple[int, int, float]:
    """Book a group's steps from its first step's start; (steps lost, steps timed, their work)."""
    first, last = attempt.first_step, attempt.last_step
    all_work, all_stall = attempt.sums_to(last)
    if kept_to < first:  # nothing it did was kept
        book.split(attempt.times[-1], {"checkpoint_save": attempt.stalls[0] + all_stall}, "wasted_progress")
        return last - first + 1, 0, 0.0
    kept_work, kept_stall = attempt.sums_to(kept_to)
    kept_after_first = kept_to - first
    first_step = max(0.0, min(attempt.times[0], book.end) - book.cursor) - attempt.stalls[0]
    # The anchor's rule: the first step's excess over the segment's mean step is start-up.
    mean = kept_work / kept_after_first if kept_after_first else None
    excess = max(0.0, first_step - mean) if mean is not None else 0.0
    book.split(attempt.times[0], {"checkpoint_save": attempt.stalls[0], "program_startup": excess}, "productive")
    book.split(attempt.times[kept_to - first], {"checkpoint_save": kept_stall}, "productive")
    book.split(attempt.times[-1], {"checkpoint_save": all_stall - kept_stall}, "wasted_progress")
    return last - kept_to, kept_after_first, kept_work


class _Ledger:
    """Books the job's wall time, interval by interval from its start, into the parts: each
    second exactly once, so the parts add up to the total whatever order the lines came in."""

    def __init__(self, start: float, end: float):
        self.end = end
        self.cursor = start
        self.parts = dict.fromkeys(PARTS, 0.0)

    def to(self, part: str, until: float) -> None:
        self.split(until, {}, part)

    def split(self, until: float, amounts: dict[str, float], rest: str) -> None:
        """[cursor, until): each of `amounts` first (as far as the interval holds), the rest to `rest`."""
        left = max(0.0, min(until, self.end) - self.cursor)
        self.cursor += left
        for part, seconds in amounts.items():
            taken = min(max(0.0, seconds), left)
            self.parts[part] += taken
            left -= taken
        self.parts[rest] += left


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
