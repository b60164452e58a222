"""List + watch with resource versions, the way an API server serves them.

Every change the controller makes is published here with the next resourceVersion
`<epoch>.<n>`; the epoch is new for every controller process, so a client resuming from a
version of an earlier controller is told GONE and lists again instead of missing changes.
Recent events are kept in a ring buffer so a client that reconnects quickly resumes exactly.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

_BUFFER = 8192
_QUEUE_LIMIT = 50_000  # a subscriber this far behind is dropped; it reconnects and resumes


@dataclass(eq=False)
class Subscription:
    kind: str  # "pods", "jobs" or "logs"
    job: str | None
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    overflowed: bool = False

    def matches(self, kind: str, job: str | None) -> bool:
        return kind == self.kind and (self.job is None or self.job == job)

    def put(self, item: Any) -> None:
        if self.queue.qsize() >= _QUEUE_LIMIT:
            self.overflowed = True
            return
        self.queue.put_nowait(item)


class EventLog:
    def __init__(self) -> None:
        self.epoch = secrets.token_hex(4)
        self.count = 0
        self._buffer: deque[tuple[int, str, str | None, dict]] = deque(maxlen=_BUFFER)
        self._subscriptions: set[Subscription] = set()
        # Called with every published change, before subscribers see it (the Kubernetes API's
        # mirror of pods and jobs: backend/local/api.py).
        self.listeners: list[Callable[[str, str, dict, str | None], None]] = []

    @property
    def version(self) -> str:
        return f"{self.epoch}.{self.count}"

    def publish(self, kind: str, event_type: str, obj: dict, job: str | None) -> None:
        self.count += 1
        event = {"type": event_type, "object": obj, "rv": self.version}
        self._buffer.append((self.count, kind, job, event))
        for listener in self.listeners:
            listener(kind, event_type, obj, job)
        for sub in self._subscriptions:
            if sub.matches(kind, job):
                sub.put(event)

    def send(self, kind: str, job: str | None, item: Any) -> None:
        """Hand `item` to subscribers without versioning it (log lines, end markers)."""
        for sub in self._subscriptions:
            if sub.matches(kind, job):
                sub.put(item)

    def subscribe(self, kind: str, job: str | None) -> Subscription:
        sub = Subscription(kind, job)
        self._subscriptions.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscriptions.discard(sub)

    def since(self, version: str, kind: str, job: str | None) -> list[dict] | None:
        """Events after `version` for a resuming watcher, or None when they are gone."""
        epoch, _, number = version.partition(".")
        if epoch != self.epoch or not number.isdigit():
            return None
        n = int(number)
        if n > self.count:
            return None
        if n < self.count and (not self._buffer or self._buffer[0][0] > n + 1):
            return None
        return [e for count, k, j, e in self._buffer
                if count > n and k == kind and (job is None or j == job)]

    def close_all(self, item: Any) -> None:
        for sub in self._subscriptions:
            sub.queue.put_nowait(item)
