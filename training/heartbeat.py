"""A rank that waits says so: `event=waiting` lines while a step overruns.

When one rank of a data-parallel group stops (a frozen node, a stuck kernel), the others block in
the step's all-reduce, and every rank's log goes silent alike: from the lines alone no one can
tell the stopped rank from the ranks waiting on it. So a thread beside the loop watches the step
in flight, and once it runs longer than a few usual steps, prints

    event=waiting step=N seconds=S rank=R world=W

every few seconds until the step ends. A stopped process prints nothing (SIGSTOP stops all its
threads; a dead kernel the same), so the silent rank among waiting ones is the one that stopped
(backend/hangs.py reads it). The thread only waits on an Event and prints: no torch, no GIL held
while the step computes.
"""

from __future__ import annotations

import threading
import time
from statistics import median
from typing import Callable

FIRST_AFTER = 5.0  # a step this many usual steps long is overrunning
FLOOR = 2.0  # seconds: never report a step shorter than this
EVERY = 2.0  # seconds between waiting lines


class Heartbeat:
    def __init__(self, emit: Callable[..., None], rank: int, world: int):
        self._emit, self._rank, self._world = emit, rank, world
        self._changed = threading.Condition()
        self._step: int | None = None  # the step in flight, None between steps
        self._began = 0.0
        self._recent: list[float] = []
        self._stopped = False
        self._thread = threading.Thread(target=self._watch, name="heartbeat", daemon=True)
        self._thread.start()

    def begin(self, step: int) -> None:
        with self._changed:
            self._step, self._began = step, time.monotonic()
            self._changed.notify()

    def end(self) -> None:
        with self._changed:
            if self._step is not None:
                self._recent = (self._recent + [time.monotonic() - self._began])[-20:]
            self._step = None
            self._changed.notify()

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify()

    def _limit(self) -> float:
        return max(FLOOR, FIRST_AFTER * median(self._recent)) if self._recent else FLOOR

    def _watch(self) -> None:
        with self._changed:
            while not self._stopped:
                if self._step is None:
                    self._changed.wait()
                    continue
                step, began = self._step, self._began
                due = began + self._limit()
                while not self._stopped and self._step == step and self._began == began:
                    left = due - time.monotonic()
                    if left > 0:
                        self._changed.wait(left)
                        continue
                    self._emit(event="waiting", step=step, seconds=time.monotonic() - began, rank=self._rank,
                               world=self._world)
                    due += EVERY
