"""An informer: the objects of one kind kept current from the store's watch, and handlers told of
every change, as client-go's shared informer does for a controller.

It lists (the watch's first events are the current objects) and then follows the watch, an
asyncio queue: no polling, and a change reaches the handlers one loop iteration after it was
stored. A watch closed under it (a watcher too far behind, or 410 Gone) lists again and tells
the handlers the difference, so nothing is missed. Handlers run in the informer's task, must
not block, and must not change the objects they are given (the store's own).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from backend.local.registry.client import Client
from backend.local.registry.strategy import Obj

log = logging.getLogger("kfcockpit.controllers")

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
Handler = Callable[[str, Obj, Obj | None], None]  # (event type, object, the object before it, if known)


def key_of(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class Informer:
    def __init__(self, client: Client, kind: str, namespace: str | None = None,
                 match: Callable[[Obj], bool] | None = None):
        self.client, self.kind, self.namespace, self.match = client, kind, namespace, match
        self.cache: dict[tuple[str, str], Obj] = {}
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.cache.get((namespace or "", name))

    def items(self) -> list[Obj]:
        return list(self.cache.values())

    async def run(self) -> None:
        while True:
            watch, backlog = self.client.watch(self.kind, self.namespace, self.match)
            try:
                self._relisted([e.object for e in backlog])
                self.synced.set()
                while (event := await watch.queue.get()) is not None:
                    self._apply(event.type, event.object)
            finally:
                self.client.unwatch(watch)
            log.info("%s informer: watch closed, listing again", self.kind)

    def _relisted(self, objects: list[Obj]) -> None:
        listed = {key_of(o): o for o in objects}
        for key, old in list(self.cache.items()):
            if key not in listed:
                del self.cache[key]
                self._tell(DELETED, old, old)
        for key, obj in listed.items():
            old = self.cache.get(key)
            if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self.cache[key] = obj
                self._tell(ADDED if old is None else MODIFIED, obj, old)

    def _apply(self, event_type: str, obj: Obj) -> None:
        key = key_of(obj)
        old = self.cache.get(key)
        if event_type == DELETED:
            self.cache.pop(key, None)
            self._tell(DELETED, obj, old)
            return
        self.cache[key] = obj
        self._tell(ADDED if old is None else MODIFIED, obj, old)

    def _tell(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        for handler in self.handlers:
            try:
                handler(event_type, obj, old)
            except Exception:  # noqa: BLE001 - a handler's bug must not stop the others' events
                log.exception("%s informer: handler %s failed on %s", self.kind, handler, key_of(obj))
