"""Merging the followed logs of a job's pods into one stream in time order.

Each pod's log is read by a thread of its own, and a read hands over whatever that pod printed
since the last one: rank 1's lines of steps 30-35 may arrive after rank 0's of steps 30-40. Sorting
each arrival alone leaves the ranks out of order with each other. A line is handed on once every
pod still followed has printed past its time (each pod's log is in time order, so nothing older
can come from it), or once it has waited `hold` seconds: a pod that says nothing (waiting for its
peers, not started yet) holds the others back that long at most. Pure bookkeeping with an
injected clock, so the order is tested without threads.
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Callable, Iterable

from backend.models import LogLine

HOLD_SECONDS = 0.5  # the most a line waits for a silent pod; the cockpit flushes every 0.2 s


class TimeMerge:
    def __init__(self, hold: float = HOLD_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.hold = hold
        self.clock = clock
        self._held: list[tuple[float, int, float, LogLine]] = []  # heap of (time, seq, arrived, line)
        self._seq = itertools.count()
        self._newest: dict[str, float] = {}  # pod → the time of its newest line so far

    def add(self, lines: Iterable[LogLine]) -> None:
        arrived = self.clock()
        for line in lines:
            heapq.heappush(self._held, (line.time, next(self._seq), arrived, line))
            if line.time > self._newest.get(line.pod, float("-inf")):
                self._newest[line.pod] = line.time

    def ready(self, open_pods: Iterable[str]) -> list[LogLine]:
        """The held lines that can go now, oldest first: those every pod in `open_pods` (whose
        logs may still grow) has printed past, and those no newer than a line that has waited
        `hold` (it goes, and what is older goes before it)."""
        held = self._held
        if not held:
            return []
        until = min((self._newest.get(pod, float("-inf")) for pod in open_pods), default=float("inf"))
        due = self.clock() - self.hold
        until = max([until] + [at for at, _, arrived, _ in held if arrived <= due])
        out = []
        while held and held[0][0] <= until:
            out.append(heapq.heappop(held)[3])
        return out

    def flush(self) -> list[LogLine]:
        """Every held line, oldest first (the logs have ended)."""
        out = [entry[3] for entry in sorted(self._held)]
        self._held.clear()
        return out

    def wait(self) -> float | None:
        """Seconds until the oldest held line may go whatever the pods do; None: nothing held."""
        if not self._held:
            return None
        return max(0.0, min(arrived for _, _, arrived, _ in self._held) + self.hold - self.clock())
