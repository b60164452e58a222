"""A clock of the test's own for the replay's playhead: `sleep` returns at once in wall time and
moves `now` to its deadline, the earliest deadline first, once every task has run as far as it
can (a small discrete-event scheduler: time moves only when nothing else would happen first)."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class VirtualTime:
    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + max(seconds, 0.0), next(self._order), future))
        return future

    async def run_until(self, done: asyncio.Future, settle: int = 20) -> None:
        """Move time forward, deadline by deadline, until `done` is."""
        while not done.done():
            for _ in range(settle):  # let every task reach its next wait
                await asyncio.sleep(0)
            while self._sleepers and self._sleepers[0][2].done():  # cancelled: woken by a change
                heapq.heappop(self._sleepers)
            if not self._sleepers:
                continue
            at, _, future = heapq.heappop(self._sleepers)
            self.now = max(self.now, at)
            future.set_result(None)
