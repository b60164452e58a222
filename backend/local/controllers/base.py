"""What every controller of the embedded control plane shares: informers that turn changes into
keys, a work queue of keys, and one reconcile at a time, as controller-runtime and kwok's
controllers run them.

A controller is built from what it needs (a `Client`, and functions where it acts outside the
API: a copy in a child process, a clock) and is given nothing else; it owns its state. Its
handlers map a change to the keys it concerns (a pod's change to its Job) and queue them; its
`reconcile(key)` reads the current objects and writes what they should become, and may return
seconds after which to look again (a deadline, a back-off). A key queued while it is being
reconciled is reconciled again after; a reconcile that raises is retried with a growing wait,
and the error logged whole (a bug, not a user's mistake: those are written into objects).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Callable, Hashable

from backend.local.registry.client import Client
from backend.local.registry.informer import Handler, Informer
from backend.local.registry.status import ApiError
from backend.local.registry.strategy import Obj

log = logging.getLogger("kfcockpit.controllers")

_RETRY_FIRST, _RETRY_MAX = 0.05, 30.0


class WorkQueue:
    """Keys to reconcile, each at most once in the queue and never twice at a time."""

    def __init__(self) -> None:
        self._order: deque[Hashable] = deque()
        self._queued: set[Hashable] = set()
        self._busy: set[Hashable] = set()
        self._again: set[Hashable] = set()
        self._wake = asyncio.Event()
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}

    def add(self, key: Hashable) -> None:
        if key in self._busy:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._order.append(key)
            self._wake.set()

    def add_after(self, key: Hashable, seconds: float) -> None:
        """Queue `key` in `seconds` (an earlier request for it wins over a later one)."""
        loop = asyncio.get_running_loop()
        timer = self._timers.get(key)
        when = loop.time() + seconds
        if timer is not None and timer.when() <= when:
            return
        if timer is not None:
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._due, key)

    def _due(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> Hashable:
        while not self._order:
            self._wake.clear()
            await self._wake.wait()
        key = self._order.popleft()
        self._queued.discard(key)
        self._busy.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self._busy.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


class Controller:
    name = "controller"

    def __init__(self, client: Client):
        self.client = client
        self.queue = WorkQueue()
        self.informers: list[Informer] = []
        self._failures: dict[Hashable, int] = {}

    def inform(self, kind: str, handler: Handler, namespace: str | None = None,
               match: Callable[[Obj], bool] | None = None) -> Informer:
        """An informer of `kind` whose changes go to `handler` (which queues keys)."""
        informer = Informer(self.client, kind, namespace, match)
        informer.handlers.append(handler)
        self.informers.append(informer)
        return informer

    async def reconcile(self, key: Hashable) -> float | None:
        """Make the world match the objects for `key`; seconds to look again, or None."""
        raise NotImplementedError

    async def run(self) -> None:
        tasks = [asyncio.create_task(i.run(), name=f"{self.name} informer {i.kind}") for i in self.informers]
        try:
            await asyncio.gather(*(i.synced.wait() for i in self.informers))
            self.started()
            while True:
                key = await self.queue.get()
                try:
                    again = await self.reconcile(key)
                except asyncio.CancelledError:
                    raise
                except ApiError as exc:  # a conflict or a vanished object: look again soon
                    log.info("%s %s: %s; retrying", self.name, key, exc.message)
                    self.queue.add_after(key, self._backoff(key))
                except Exception:  # noqa: BLE001 - a bug: logged whole, retried with a growing wait
                    log.exception("%s: reconciling %s failed", self.name, key)
                    self.queue.add_after(key, self._backoff(key))
                else:
                    self._failures.pop(key, None)
                    if again is not None:
                        self.queue.add_after(key, again)
                finally:
                    self.queue.done(key)
        finally:
            self.queue.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def started(self) -> None:
        """Every informer has listed: queue what must be looked at once (default: nothing more;
        the informers' first events did)."""

    def _backoff(self, key: Hashable) -> float:
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        return min(_RETRY_FIRST * 2 ** (failures - 1), _RETRY_MAX)


def namespaced_key(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


def owner_key(obj: Obj, kind: str) -> tuple[str, str] | None:
    """(namespace, name) of the controller owner of `kind` of `obj`, if it has one."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == kind and ref.get("controller"):
            return obj["metadata"].get("namespace") or "", ref["name"]
    return None
