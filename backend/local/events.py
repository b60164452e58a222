"""The controller's own event bus: what runners publish, for the parts of the controller that follow it.

Every pod and job change a runner publishes goes at once, in order, to the listeners (the
Kubernetes API's mirror of pods and jobs: backend/local/api.py), which make it the Pod, TrainJob
and JobSet objects every client watches. Log items (a pod's new lines, a job's logs ending) wake
the API's log followers (pod_log.py) subscribed to that job. Nothing here is versioned: the API
store's resourceVersions are what clients resume from.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable

_QUEUE_LIMIT = 50_000  # items a subscriber that stopped reading can hold; the rest are dropped


@dataclass(eq=False)
class Subscription:
    kind: str  # "logs"
    job: str | None
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)

    def matches(self, kind: str, job: str | None) -> bool:
        return kind == self.kind and (self.job is None or self.job == job)

    def put(self, item: Any) -> None:
        if self.queue.qsize() < _QUEUE_LIMIT:
            self.queue.put_nowait(item)


class EventLog:
    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        # Called with every published change (kind "pods" or "jobs", event type, object, job).
        self.listeners: list[Callable[[str, str, dict, str | None], None]] = []

    def publish(self, kind: str, event_type: str, obj: dict, job: str | None) -> None:
        for listener in self.listeners:
            listener(kind, event_type, obj, job)

    def send(self, kind: str, job: str | None, item: Any) -> None:
        """Hand `item` to the subscribers of `kind` for `job` (log lines, end markers)."""
        for sub in self._subscriptions:
            if sub.matches(kind, job):
                sub.put(item)

    def subscribe(self, kind: str, job: str | None) -> Subscription:
        sub = Subscription(kind, job)
        self._subscriptions.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscriptions.discard(sub)
