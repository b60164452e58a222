"""The watches `KubeCluster` opens, as async iterators: one kind (a `watcher.ListWatch` run in a
thread: list, then watch from the resourceVersion), one pod by name until it is gone (the reader
pod), and one pod watch over the union of several label selectors (a RayJob's pods are found by
more than one, rayjobs.py). Nothing here decides what an event means; the callers do.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from backend.cluster import ClusterError
from backend.kube.resources import Resources, missing_type
from backend.kube.threads import Ended, cancel_all, iterate_in_thread, pump
from backend.kube.watcher import DEFAULT_READ_TIMEOUT, ListWatch, WatchEvent, object_key, resource_version


class Watches:
    def __init__(self, resources: Resources, read_timeout: float = DEFAULT_READ_TIMEOUT) -> None:
        self.resources = resources
        self.read_timeout = read_timeout

    def watch(self, kind: str, label_selector: str | None = None, field_selector: str | None = None,
              namespace: str | None = None) -> AsyncIterator[WatchEvent]:
        """`namespace`: another than the cockpit's, or resources.ALL_NAMESPACES."""
        fn, args = self.resources.bind("list", kind, namespace=namespace)
        watch = ListWatch(self.resources.conn, fn, *args, label_selector=label_selector,
                          field_selector=field_selector, read_timeout=self.read_timeout,
                          what=f"{kind} watch", missing=missing_type(kind))
        return iterate_in_thread(watch, f"watch-{kind}")

    async def one_pod(self, name: str) -> AsyncIterator[dict]:
        """The pod as it changes; ClusterError if it is deleted first."""
        async for event in self.watch("Pod", field_selector=f"metadata.name={name}"):
            if event.type == "DELETED":
                raise ClusterError(f"pod {name} was deleted before it finished")
            if event.type != "SYNCED":
                yield event.object

    async def pods(self, selectors: list[str]) -> AsyncIterator[WatchEvent]:
        """One pod watch over the union of label selectors: a pod two of them match is reported
        once (ADDED, then MODIFIED when its resourceVersion moves, DELETED when no selector
        matches it any more); SYNCED once every watch has listed."""
        if len(selectors) == 1:
            async for event in self.watch("Pod", label_selector=selectors[0]):
                yield event
            return
        queue: asyncio.Queue = asyncio.Queue()
        tasks = [pump(self.watch("Pod", label_selector=selector), queue, selector) for selector in selectors]
        matched: dict[str, set[str]] = {}  # pod -> the selectors that match it
        versions: dict[str, str] = {}  # pod -> the resourceVersion last reported
        synced: set[str] = set()
        try:
            while True:
                selector, item = await queue.get()
                if isinstance(item, Ended):
                    raise item.error or ClusterError("the pod watch ended")
                if item.type == "SYNCED":
                    synced.add(selector)
                    if len(synced) == len(selectors):
                        yield item
                    continue
                key = object_key(item.object)
                holders = matched.setdefault(key, set())
                if item.type == "DELETED":
                    holders.discard(selector)
                    if not holders:
                        del matched[key]
                        versions.pop(key, None)
                        yield item
                    continue
                new = not holders
                holders.add(selector)
                if versions.get(key) != resource_version(item.object):
                    versions[key] = resource_version(item.object)
                    yield WatchEvent("ADDED" if new else "MODIFIED", item.object)
        finally:
            await cancel_all(tasks)
