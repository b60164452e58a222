"""Blocking producers (the synchronous `kubernetes` client's streams) run in threads, consumed
from asyncio.

A producer is a function `produce(emit, halt)` that runs in its own daemon thread and calls
`emit(item)` for every item; the async side gets the items in order. When the consumer stops
iterating, `halt` is set and every HTTP response the producer registered with `halt.track()` is
shut down, which wakes a thread blocked in a socket read at once (no waiting for a timeout).
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from typing import Any, AsyncIterator, Callable, Iterator


class Halt:
    """Set when the consumer has gone; shuts down the responses a producer is reading."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._responses: set[Any] = set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """A retry back-off that ends early when halted; True when halted."""
        return self._event.wait(seconds)

    def set(self) -> None:
        self._event.set()
        with self._lock:
            responses = list(self._responses)
        for response in responses:
            _shutdown(response)

    @contextmanager
    def track(self, response: Any) -> Iterator[Any]:
        """Register a streaming response for the time it is read; always released after."""
        with self._lock:
            self._responses.add(response)
        if self._event.is_set():
            _shutdown(response)
        try:
            yield response
        finally:
            with self._lock:
                self._responses.discard(response)
            try:
                response.release_conn()
            except Exception:  # noqa: BLE001 - a broken connection is simply dropped
                pass


def _shutdown(response: Any) -> None:
    try:
        response.shutdown()  # urllib3 >= 2.3: unblocks a read in another thread
    except Exception:  # noqa: BLE001
        pass
    try:
        response.close()
    except Exception:  # noqa: BLE001
        pass


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()

Producer = Callable[[Callable[[Any], None], Halt], None]


async def iterate_in_thread(produce: Producer, name: str) -> AsyncIterator[Any]:
    """Items `produce` emits from its thread, in order; its exception is raised here."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    halt = Halt()

    def emit(item: Any) -> None:
        if halt.is_set():
            return
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            halt.set()

    def target() -> None:
        try:
            produce(emit, halt)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            if not halt.is_set():
                emit(_Failure(exc))
        finally:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, _DONE)
            except RuntimeError:
                pass

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item
    finally:
        halt.set()


async def drain(queue: asyncio.Queue) -> list:
    """Wait for one item, then take every item already queued: one burst, handled as one batch."""
    items = [await queue.get()]
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


class Ended:
    """What `pump` puts in the queue when its source has ended (error is None) or failed."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


def pump(source: AsyncIterator[Any], queue: asyncio.Queue, tag: str) -> asyncio.Task:
    """A task copying a source's items into a shared queue as (tag, item), then (tag, Ended(...)),
    so one consumer can take several streams in arrival order. Cancelling it closes the source."""

    async def run() -> None:
        try:
            async for item in source:
                queue.put_nowait((tag, item))
            queue.put_nowait((tag, Ended()))
        except Exception as exc:  # noqa: BLE001 - handed to the consumer (not CancelledError, a BaseException)
            queue.put_nowait((tag, Ended(exc)))
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()

    return asyncio.create_task(run(), name=f"pump-{tag}")


async def cancel_all(tasks: list[asyncio.Task]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
