"""A slow rank found from the ranks' own compute times: a straggler.

In synchronous data parallelism every rank's step lasts as long as the slowest rank's (the
all-reduce waits for it), so step times and step lines cannot tell which rank is slow. Each rank
prints its own compute time per step and its wait in the step's collective (`compute=` and `wait=`
on its step line, training/loop.py); NVIDIA's resiliency extension times sections the same way
and flags a rank whose relative performance score falls below 0.7.

This reads those lines, on any cluster. Steps are judged in windows of `StragglerRule.window`
steps, the first `warmup` steps of a group left out (DDP's bucket set-up, first allocations). In
each window a rank's speed is the group's median compute time over its own mean (the rank itself
left out of the median, so a group of two can name one); under `threshold` in `persist` windows in
a row it is a straggler, until a window finds it at speed again. One slow window is not enough: on
a shared machine a rank descheduled for a moment is slower for a window (measured: 0.58x for 20
steps of an undisturbed two-rank run on a loaded two-core machine).
What it costs the group is the others' wait beyond the straggler's own (the collective's transfer
both pay), as a share of their step. No clock: windows are counted in steps, so what a job shows
is the same however late its lines are read. Ranks are the lines' own `rank=`; a new attempt (or
a group started again) starts afresh, as in `backend/hangs.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Iterable

from backend.hangs import Line
from backend.raytrain.groups import WorkerGroups, process_of
from training.logfmt import parse_line

DEFAULT_THRESHOLD = 0.7  # nvidia-resiliency-ext's gpu_relative_perf_threshold


@dataclass(frozen=True)
class StragglerRule:
    threshold: float = DEFAULT_THRESHOLD  # a rank's speed against the group's median
    window: int = 20  # steps judged together
    warmup: int = 5  # a group's first steps, not judged
    persist: int = 2  # windows in a row a rank must be slow in to be named

    def describe(self) -> str:
        return (f"compute under {self.threshold:g}x the group's median in {self.persist} windows of "
                f"{self.window} steps in a row, the first {self.warmup} steps left out")


@dataclass(frozen=True)
class Straggler:
    rank: int
    speed: float  # the group's median compute over this rank's: 0.5 is half the speed
    group_wait: float  # the share of the others' step they wait for it
    steps: tuple[int, int]  # the window judged (first, last step)

    def one_line(self) -> str:
        return (f"straggler rank {self.rank}: {self.speed:.2f}x the group's speed, the group waits "
                f"{self.group_wait:.0%} of each step for it")

    def short(self) -> tuple[str, str]:
        """For a one-line bar: who and how slow, then what it costs (the part a narrow bar can
        go without)."""
        return f"SLOW rank {self.rank} {self.speed:.2f}x", f": group waits {self.group_wait:.0%}"

    def as_dict(self) -> dict:
        return {"rank": self.rank, "speed": round(self.speed, 3), "group_wait": round(self.group_wait, 3),
                "steps": list(self.steps)}


@dataclass
class StragglerWatch:
    """Fed lines and pods as they come; `stragglers` is the newest window's verdict."""

    rule: StragglerRule = field(default_factory=StragglerRule)
    windows: int = 0  # judged so far (in this group)
    named: dict[int, Straggler] = field(default_factory=dict)  # every rank ever named: its newest verdict
    _times: dict[int, dict[int, tuple[float, float]]] = field(default_factory=dict)  # rank -> step -> (compute, wait)
    _first: int | None = None  # the first step judged: the group's start + warm-up + 1
    _next: int | None = None  # the first step of the next window
    _verdict: tuple[Straggler, ...] = ()
    _slow_for: dict[int, int] = field(default_factory=dict)  # rank -> windows in a row it was slow in
    _groups: WorkerGroups = field(default_factory=WorkerGroups)
    _attempt: int = -1

    @property
    def stragglers(self) -> tuple[Straggler, ...]:
        """The slowest first."""
        return self._verdict

    def lines(self, lines: Iterable[Line]) -> None:
        for line in lines:
            if line.rank < 0 or "=" not in line.text:
                continue
            if line.step is None:
                if "event=start" in line.text or "event=training_started" in line.text:
                    self._event(line)
                continue
            if "compute=" not in line.text:
                continue  # a worker older than the compute field
            try:  # not parse_line: the cockpit reads every rank's step lines
                compute, wait = float(_field(line.text, "compute")), float(_field(line.text, "wait") or 0.0)
            except ValueError:
                continue
            if self._first is None:
                self._begin(line.step - 1)
            if self._next is None or line.step < self._next:
                continue  # warm-up, or a window judged already
            self._times.setdefault(line.rank, {})[line.step] = (compute, wait)
        self._judge()

    def pod(self, pod) -> None:
        """A pod as listed or watched (`backend.models.Pod`): a new attempt is a new group."""
        if pod.rank >= 0 and pod.restart_attempt > self._attempt:
            self._attempt = pod.restart_attempt
            self._reset()

    def _event(self, line: Line) -> None:
        fields = parse_line(line.text)
        if fields.get("event") == "start":
            if self._groups.started(line.rank, process_of(fields)):
                self._reset()
        elif self._first is None:  # training_started: where this group's steps begin
            self._begin(_int(fields.get("step")))

    def _begin(self, started: int) -> None:
        self._first = self._next = started + self.rule.warmup + 1

    def _reset(self) -> None:
        self._times, self._first, self._next, self._verdict, self.windows = {}, None, None, (), 0
        self._slow_for = {}

    def _judge(self) -> None:
        """Every complete window in turn: one whose steps every rank heard from has printed, or
        that the newest step has left a whole window behind (a rank whose log is no longer read,
        in the cockpit following a large group, holds nothing up: it goes once silent a window)."""
        while self._next is not None and len(self._times) > 1:
            steps = range(self._next, self._next + self.rule.window)
            newest = {rank: max(times, default=-1) for rank, times in self._times.items()}
            if max(newest.values()) < steps[-1] + self.rule.window:
                if min(newest.values()) < steps[-1]:
                    return  # not complete yet
            else:
                for rank in [r for r, step in newest.items() if step < steps[0]]:
                    del self._times[rank]
            means = {}
            for rank, times in self._times.items():
                seen = [times[s] for s in steps if s in times]
                if seen:
                    means[rank] = (sum(c for c, _ in seen) / len(seen), sum(w for _, w in seen) / len(seen))
            slow = self._slow(means, (steps[0], steps[-1]))
            self._slow_for = {s.rank: self._slow_for.get(s.rank, 0) + 1 for s in slow}
            self._verdict = tuple(s for s in slow if self._slow_for[s.rank] >= self.rule.persist)
            self.named.update((s.rank, s) for s in self._verdict)
            self.windows += 1
            self._next += self.rule.window
            for times in self._times.values():
                for step in [s for s in times if s < self._next]:
                    del times[step]

    def _slow(self, means: dict[int, tuple[float, float]], steps: tuple[int, int]) -> tuple[Straggler, ...]:
        found = []
        for rank, (compute, wait) in means.items():
            others = [m for r, m in means.items() if r != rank]
            if not others or compute <= 0:
                continue
            speed = median(c for c, _ in others) / compute
            if speed >= self.rule.threshold:
                continue
            their_wait = median(w for _, w in others)
            their_step = median(c + w for c, w in others)
            share = max(0.0, their_wait - wait) / their_step if their_step > 0 else 0.0
            found.append(Straggler(rank=rank, speed=speed, group_wait=share, steps=steps))
        return tuple(sorted(found, key=lambda s: s.speed))


def _field(text: str, key: str) -> str:
    """The value of ` key=value` in a logfmt line (a number: never quoted), "" where absent."""
    at = text.find(f" {key}=")
    if at < 0:
        return ""
    at += len(key) + 2
    end = text.find(" ", at)
    return text[at:] if end < 0 else text[at:end]


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0
