"""Merging the logs of a job's pods into one stream a person can read: the ranks' lines of one
step side by side, in the order things happened.

Each pod's log is in order; across pods only the time a line was stamped can order them, and it is
coarse: a runtime stamps the lines it reads from a container's output together, so a fast worker's
forty steps may share one stamp, and its peer's forty the next. Sorted by stamp, a finished job read
"all of rank 0, then all of rank 1". So two lines of one restart attempt, of different ranks,
stamped within `GRAIN` of each other, are ordered by the step they belong to (a step line's step;
any other line goes after the step line before it in its pod), then by stamp; any other two lines
by their stamps. Pods of different attempts never interleave by step: a new group restarts from an
older step.

Followed, lines arrive per pod as each is read: a line is handed on once no pod still followed can
bring one that goes before it (each pod's log only grows, in order), or once it has waited `hold`
seconds (a pod that says nothing, waiting for its peers or not started yet, holds the others back
that long at most). Pure bookkeeping with an injected clock, tested without threads.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable

from backend.models import LogLine

HOLD_SECONDS = 0.5  # the most a line waits for a silent pod; the cockpit flushes every 0.25 s
GRAIN = 1.0  # lines of one attempt stamped this close together are ordered by step


@dataclass
class _Pod:
    rank: int
    attempt: int | None  # None: not known (compared by stamp alone)
    held: deque  # (line, step position, arrived) not handed on yet, in the pod's order
    newest: float = float("-inf")  # the stamp of its newest line so far
    position: float = -0.5  # the step position of its newest line (before any step: -0.5)


class LogMerge:
    def __init__(self, hold: float = HOLD_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.hold = hold
        self.clock = clock
        self._pods: dict[str, _Pod] = {}

    def pod(self, name: str, rank: int, attempt: int | None) -> None:
        """A pod whose lines will come: its rank and restart attempt (the pod's labels)."""
        if name not in self._pods:
            self._pods[name] = _Pod(rank, attempt, deque())
        elif self._pods[name].attempt is None:
            self._pods[name].attempt = attempt

    def knows(self, name: str) -> bool:
        return name in self._pods

    def add(self, lines: Iterable[LogLine]) -> None:
        """Lines of one or more pods, each pod's in its order."""
        arrived = self.clock()
        for line in lines:
            pod = self._pods.get(line.pod)
            if pod is None:
                pod = self._pods[line.pod] = _Pod(line.rank, None, deque())
            position = float(line.step) if line.step is not None else int(pod.position) + 0.5
            pod.position = max(pod.position, position)
            pod.newest = max(pod.newest, line.time)
            pod.held.append((line, position, arrived))

    def ready(self, open_pods: Iterable[str]) -> list[LogLine]:
        """The lines that can go now, in the merged order: those no pod in `open_pods` (whose logs
        may still grow) can bring a line before, and those that waited `hold`."""
        still = [self._pods[name] for name in open_pods if name in self._pods]
        due = self.clock() - self.hold
        out = []
        while (first := self._first()) is not None:
            pod, (line, position, arrived) = first
            if arrived > due and any(other is not pod and self._may_precede(other, pod, line, position)
                                     for other in still):
                break
            out.append(pod.held.popleft()[0])
        return out

    def flush(self) -> list[LogLine]:
        """Every held line, in the merged order (the logs have ended)."""
        out = []
        while (first := self._first()) is not None:
            out.append(first[0].held.popleft()[0])
        return out

    def wait(self) -> float | None:
        """Seconds until the oldest held line may go whatever the pods do; None: nothing held."""
        arrivals = [pod.held[0][2] for pod in self._pods.values() if pod.held]
        if not arrivals:
            return None
        return max(0.0, min(arrivals) + self.hold - self.clock())

    # ------------------------------------------------------------------ the order

    def _first(self) -> tuple[_Pod, tuple] | None:
        best: tuple[_Pod, tuple] | None = None
        for pod in self._pods.values():
            if pod.held and (best is None or self._before(pod, pod.held[0], best[0], best[1])):
                best = (pod, pod.held[0])
        return best

    @staticmethod
    def _by_step(a: _Pod, b: _Pod, at: float, other_at: float) -> bool:
        return (a.rank != b.rank and a.attempt is not None and a.attempt == b.attempt
                and abs(at - other_at) <= GRAIN)

    def _before(self, a: _Pod, held_a: tuple, b: _Pod, held_b: tuple) -> bool:
        (line_a, position_a, _), (line_b, position_b, _) = held_a, held_b
        if self._by_step(a, b, line_a.time, line_b.time):
            return (position_a, line_a.time, a.rank) < (position_b, line_b.time, b.rank)
        return (line_a.time, a.rank) < (line_b.time, b.rank)

    def _may_precede(self, other: _Pod, pod: _Pod, line: LogLine, position: float) -> bool:
        """Could `other`'s next line (stamped no earlier than its newest, at no earlier a step)
        go before `line`?"""
        if other.newest > line.time + GRAIN:
            return False
        if other.rank != pod.rank and other.attempt is not None and other.attempt == pod.attempt:
            # within GRAIN its next line goes by step: only one at an earlier step (or stamp) goes first
            return ((other.position, other.newest, other.rank) < (position, line.time, pod.rank)
                    or other.newest < line.time - GRAIN)
        return other.newest <= line.time
