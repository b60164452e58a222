"""Keeping a watch open: when a backend stream ends or is lost (a user error, the Cluster
protocol's way of saying "unreachable", "went away"; or an OSError, the socket or the state
directory under it failing), say so, wait, and open it again. Any other exception is a bug: it is
raised to the worker, whose error handler logs it and shows it whole.

The wait grows (0.5 s, 1 s, 2 s … 15 s) and resets once the stream delivers again, so a dead
controller costs a retry every few seconds, not a busy loop. The waiting happens inside the
worker that owns the stream; cancelling the worker (following another job, quitting) stops it.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Awaitable, Callable, TypeVar

from backend.errors import USER_ERRORS, one_line

T = TypeVar("T")

# A connection lost rather than a bug: worth waiting and trying again.
LOST: tuple[type[Exception], ...] = (*USER_ERRORS, OSError)


class Backoff:
    def __init__(self, first: float = 0.5, most: float = 15.0) -> None:
        self.first = first
        self.most = most
        self._next = first

    def reset(self) -> None:
        self._next = self.first

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self.most, self._next * 2)
        return delay


async def keep_open(
    open_stream: Callable[[], AsyncIterator[T]],
    on_item: Callable[[T], None],
    on_lost: Callable[[str, float], None],
    *,
    on_reopen: Callable[[], None] | None = None,
    done: Callable[[], Awaitable[bool]] | None = None,
    gives_up: Callable[[BaseException], bool] = lambda exc: False,
    backoff: Backoff | None = None,
) -> None:
    """Feed every item of `open_stream()` to `on_item`, reopening after an end or an error.

    `done`: asked when the stream ends; True means the end was normal (a finished job's logs
    stop), not a lost backend, and we stop too.
    `on_reopen` runs before every reopen (not the first open), e.g. to clear what will be resent.
    `gives_up(exc)`: errors that reopening cannot cure (the job was deleted): raised to the caller.
    """
    backoff = backoff or Backoff()
    first = True
    while True:
        if not first and on_reopen is not None:
            on_reopen()
        first = False
        try:
            stream = open_stream()
            try:
                async for item in stream:
                    backoff.reset()
                    on_item(item)
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()
            if done is not None and await done():
                return
            reason = "the stream ended early"
        except LOST as exc:
            if gives_up(exc):
                raise
            reason = one_line(exc)
        delay = backoff.next_delay()
        on_lost(reason, delay)
        await asyncio.sleep(delay)


async def sample(
    read: Callable[[], Awaitable[T | None]],
    on_value: Callable[[T | None], None],
    *,
    every: float,
    wanted: Callable[[], bool],
    absent_every: float = 30.0,
) -> None:
    """Read what cannot be watched (metrics.k8s.io: kubectl top and k9s poll it too) every
    `every` seconds while `wanted()` (its panel is on screen), handing each reading to
    `on_value`. None means the platform has no such data (no metrics-server): ask again only every
    `absent_every` seconds. A lost backend is a reading of None too, quietly: the watches already
    say the cluster is away, and a notification per tick would be a storm. Bugs are raised."""
    while True:
        delay = every
        if wanted():
            try:
                value = await read()
            except LOST:
                value = None
            else:
                delay = every if value is not None else absent_every
            on_value(value)
        await asyncio.sleep(delay)
