"""Which of a followed job's pods have their logs read: the ranks a person looks at, not the group.

A job of 512 ranks prints five thousand lines a second, and following every pod's log costs a
stream each (a thread and a connection on the client path, `backend/kube/logs.py`): the cockpit's
cost grew with the group, not with what it showed. A person reads a few ranks at a time, and
rank 0 speaks for the group (its steps, its saves, its restarts: what goodput and the failure
timeline are made of); every pod's state still comes from one pod watch, whatever the focus.

The caller owns the focus and changes it while the stream runs (`want`); the stream follows the
pods of the wanted ranks, of any restart attempt, at most `limit` ranks. A pod that joins the
focus after it started is read from its last lines (`tail`), not from its first: what it says now
is why it was wanted. No focus at all (`stream_logs(job)`) reads every pod, as `kubectl logs` and
the lesson's checks want.
"""

from __future__ import annotations

from typing import Callable, Iterable

MAX_FOLLOWED = 16  # ranks whose logs one stream reads at once, however many the caller asks for
TAIL_LINES = 50  # of a pod that joins the focus after it started: what it printed just before


class LogFocus:
    def __init__(self, ranks: Iterable[int] = (0,), limit: int = MAX_FOLLOWED, tail: int = TAIL_LINES) -> None:
        self.limit = limit
        self.tail = tail
        self.ranks: tuple[int, ...] = ()
        self._wanted: frozenset[int] = frozenset()
        self._listeners: list[Callable[[], None]] = []
        self.want(ranks)

    def want(self, ranks: Iterable[int]) -> bool:
        """Follow these ranks from now on: the first `limit` of them, so the caller lists them
        most wanted first. Whether that changed anything (the listeners heard it)."""
        chosen = tuple(dict.fromkeys(ranks))[: self.limit]
        if chosen == self.ranks:
            return False
        self.ranks, self._wanted = chosen, frozenset(chosen)
        for listener in list(self._listeners):
            listener()
        return True

    def wants(self, rank: int) -> bool:
        return rank in self._wanted

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` after every change; returns what stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)
