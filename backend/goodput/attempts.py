"""One worker group's timeline, as its workers' lines tell it: the points goodput is measured
between. A group (an attempt) is what ml-goodput-measurement calls a segment: the run of steps
between a (re)start and the next disruption.

    processes_started    its last rank's process began (`process_started=` of the start lines)
    started           S  the group formed (its first `event=start` line: printed after rendezvous)
    resumed           R  the checkpoint was loaded (`event=resumed`, with `restore_seconds`)
    training_started  T  its loop began its first step (`event=training_started`)
    times[i]             the end of step first_step + i (the earliest rank's step line)

Steps are timed by their lines' ends; the anchor records steps' starts. They are the same
intervals shifted by one: the end of step k is the start of step k + 1, and the first step's start
is T. Everything here is sums kept as the lines come, so a report is cheap at any time.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Attempt:
    started: float
    processes_started: float | None = None
    resumed: float | None = None
    resumed_from: int | None = None
    restore_seconds: float = 0.0
    training_started: float | None = None
    first_step: int | None = None
    times: list[float] = field(default_factory=list)
    stalls: list[float] = field(default_factory=list)  # ckpt_wait inside step first_step + i
    # work[i]: seconds of steps first_step+1 .. first_step+i less their stalls (the first step is
    # measured from T, apart); stall[i] likewise for the stalls
    work: list[float] = field(default_factory=lambda: [0.0])
    stall: list[float] = field(default_factory=lambda: [0.0])
    survivor_save_began: float | None = None  # a survivor's save at teardown (this project's part)
    survivor_save_done: float | None = None
    survivor_save_seconds: float = 0.0
    done: float | None = None  # its `event=done` line
    done_wait: float = 0.0

    @property
    def last_step(self) -> int | None:
        return None if self.first_step is None else self.first_step + len(self.times) - 1

    @property
    def stepped(self) -> bool:
        return self.first_step is not None

    @property
    def start_point(self) -> int | None:
        """The step this group continued from: what it kept of the groups before it."""
        if self.resumed_from is not None:
            return self.resumed_from
        return None if self.first_step is None else self.first_step - 1

    @property
    def first_step_began(self) -> float:
        """T, or the nearest point before it a log without `event=training_started` has."""
        for point in (self.training_started, self.resumed):
            if point is not None:
                return point
        return self.started

    # ------------------------------------------------------------------ input

    def add_step(self, step: int, at: float, stall: float) -> None:
        last = self.last_step
        if last is None:
            self.first_step, self.times, self.stalls = step, [at], [stall]
            return
        if step <= last:  # another rank's line for a step seen: the earliest time counts
            index = step - self.first_step
            if index < 0:
                return
            self.stalls[index] = max(self.stalls[index], stall)
            if index == len(self.times) - 1 and index > 0 and stall > 0:
                self._redo_last()
            return
        for _ in range(last + 1, step):  # lines not seen: the steps share the interval
            self._append(at, 0.0)
        self._append(at, stall)

    def _append(self, at: float, stall: float) -> None:
        interval = max(0.0, at - self.times[-1])
        stall = min(stall, interval)
        self.times.append(at)
        self.stalls.append(stall)
        self.work.append(self.work[-1] + interval - stall)
        self.stall.append(self.stall[-1] + stall)

    def _redo_last(self) -> None:
        interval = max(0.0, self.times[-1] - self.times[-2])
        stall = min(self.stalls[-1], interval)
        self.work[-1] = self.work[-2] + interval - stall
        self.stall[-1] = self.stall[-2] + stall

    def survivor_saved(self, began: float, done: float, seconds: float) -> None:
        self.survivor_save_began = began if self.survivor_save_began is None else min(self.survivor_save_began, began)
        self.survivor_save_done = done if self.survivor_save_done is None else max(self.survivor_save_done, done)
        # Survivors save the same step: one writes, the others wait on its claim; the longest is the time.
        self.survivor_save_seconds = max(self.survivor_save_seconds, seconds)

    # ------------------------------------------------------------------ sums

    def sums_to(self, step: int) -> tuple[float, float]:
        """(work, stall) of steps first_step+1 .. `step` (0, 0 below that)."""
        index = min(max(step - self.first_step, 0), len(self.times) - 1)
        return self.work[index], self.stall[index]
