"""The replay's clock: where in the recording it is (seconds from its start), at what speed,
paused or not, and what waits for it.

Time comes from an injected `monotonic` and `sleep`, so a test plays a recording with a clock of
its own, instantly, and asserts how long it took on that clock. A change (pause, seek, speed)
wakes everything waiting at once. Going back (a seek backwards, a loop) starts a new `generation`:
the streams already past that point end and are opened again from it, as a lost watch is.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

EPSILON = 1e-6  # seconds of the recording: reached
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


class Playhead:
    def __init__(self, length: float, speed: float = 1.0, position: float = 0.0, loop: bool = False,
                 monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.length = length
        self.loop = loop
        self.generation = 0
        self._monotonic = monotonic
        self._sleep = sleep
        self._speed = speed
        self._paused = False
        self._base = min(max(position, 0.0), length)
        self._since = monotonic()
        self._changed: asyncio.Event | None = None  # made in the loop that first waits

    @property
    def speed(self) -> float:
        return self._speed

    @property
    def paused(self) -> bool:
        return self._paused

    def position(self) -> float:
        """Seconds into the recording now; at its end it stays there (or, looping, starts again)."""
        if self._paused:
            return self._base
        moved = self._base + (self._monotonic() - self._since) * self._speed
        if moved >= self.length and self.loop and self.length > 0:
            self._rebase(0.0)
            self.generation += 1
            self._wake()
            return 0.0
        return min(moved, self.length)

    def _rebase(self, position: float) -> None:
        self._base = min(max(position, 0.0), self.length)
        self._since = self._monotonic()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def set_speed(self, speed: float) -> None:
        self._rebase(self.position())
        self._speed = speed
        self._wake()

    def faster(self, steps: int = 1) -> float:
        """The next speed of SPEEDS up (or down, with a negative `steps`)."""
        index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self._speed))
        self.set_speed(SPEEDS[min(max(index + steps, 0), len(SPEEDS) - 1)])
        return self._speed

    def toggle_pause(self) -> bool:
        self._rebase(self.position())
        self._paused = not self._paused
        self._wake()
        return self._paused

    def seek(self, position: float) -> float:
        before = self.position()
        self._rebase(position)
        if self._base < before:
            self.generation += 1  # what was shown after it is undone: the streams start again
        self._wake()
        return self._base

    async def reach(self, at: float, generation: int) -> bool:
        """Wait until the position is at or past `at`; False when the playhead went back (a new
        generation) first, or the recording ended before `at`."""
        while True:
            position = self.position()
            if self.generation != generation:
                return False
            if position >= at - EPSILON:  # a clock's float arithmetic lands a hair short
                return True
            if position >= self.length and not self.loop:
                await self.changed()  # at the end: only a seek or a loop moves it
                continue
            wait = None if self._paused else (at - position) / self._speed
            await self._wait(wait)

    async def went_back(self, generation: int) -> None:
        """Wait until the playhead goes back from `generation`: a seek back, or the loop's end."""
        while self.generation == generation:
            position = self.position()
            if self.generation != generation:
                return
            looping = self.loop and not self._paused and self.length > 0
            await self._wait((self.length - position) / self._speed if looping else None)

    async def changed(self) -> None:
        await self._wait(None)

    async def _wait(self, seconds: float | None) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        changed = asyncio.ensure_future(self._changed.wait())
        waits = {changed}
        if seconds is not None:
            waits.add(asyncio.ensure_future(self._sleep(seconds)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
