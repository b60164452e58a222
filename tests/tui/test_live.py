"""Keeping a watch open: an ended or failing stream is reported and reopened with a growing wait;
a stream that ends because its work is done is not."""

from __future__ import annotations

import asyncio

import pytest

from backend.errors import Unavailable
from tui.model.live import Backoff, keep_open


def test_backoff_doubles_up_to_a_ceiling_and_resets():
    b = Backoff(first=0.5, most=3.0)
    assert [b.next_delay() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    b.reset()
    assert b.next_delay() == 0.5


async def test_a_failing_stream_is_reported_then_reopened_and_items_keep_flowing():
    opened: list[int] = []
    seen: list[int] = []
    lost: list[str] = []
    reopened: list[int] = []

    async def stream():
        opened.append(len(opened))
        attempt = len(opened)
        yield attempt * 10
        if attempt == 1:
            raise Unavailable("controller gone\nsecond line")
        yield attempt * 10 + 1

    async def finished() -> bool:
        return len(opened) >= 2

    await asyncio.wait_for(
        keep_open(stream, seen.append, lambda reason, delay: lost.append(reason),
                  on_reopen=lambda: reopened.append(1), done=finished,
                  backoff=Backoff(first=0.01, most=0.01)),
        timeout=10)
    assert seen == [10, 20, 21]
    assert lost == ["controller gone"]  # one line, the first
    assert reopened == [1]


async def test_cancelling_closes_the_stream():
    closed = asyncio.Event()
    started = asyncio.Event()

    async def stream():
        try:
            started.set()
            yield 1
            await asyncio.Event().wait()  # a watch with nothing new
        finally:
            closed.set()

    task = asyncio.create_task(keep_open(stream, lambda item: None, lambda r, d: None))
    await started.wait()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()


async def test_a_bug_in_a_stream_is_raised_not_taken_for_a_lost_connection():
    lost: list[str] = []

    async def stream():
        yield 1
        raise KeyError("pod")

    with pytest.raises(KeyError):
        await asyncio.wait_for(keep_open(stream, lambda item: None, lambda r, d: lost.append(r),
                                         backoff=Backoff(first=0.01, most=0.01)), timeout=10)
    assert lost == []
