"""The embedded control plane in-process, for tests of its registry, controllers and kubelets: a real
store and generic registry with every kind's strategy, reached through the in-process client
(what kwok's controller tests do with a fake clientset, with our real registry instead), and
waits that follow the store's watch instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Callable

from backend.local.registry.client import Client
from backend.local.registry.generic import Registry
from backend.local.registry.kinds import Kinds
from backend.local.registry.store import Store
from backend.local.registry.strategies import strategies

WAIT = 10.0  # seconds: what a wait allows before the test fails (in-process: milliseconds expected)


def plane(directory: Path | None = None, clock: Callable[[], float] = time.time, kinds: Kinds | None = None) -> Client:
    """A client of a fresh registry with the namespaces every cluster has; `kinds`: those it
    serves, if not the embedded cluster's."""
    kinds = kinds or Kinds()
    registry = Registry(kinds, Store(kinds, directory), strategies(kinds, clock=clock), clock)
    client = Client(registry)
    for namespace in ("default", "kube-system", "kube-node-lease"):  # a kubelet renews its Lease in the last
        client.create("Namespace", {"metadata": {"name": namespace}})
    return client


@asynccontextmanager
async def running(*controllers) -> AsyncIterator[None]:
    """The controllers' (or kubelets') `run()` as tasks, cancelled after."""
    tasks = [asyncio.create_task(c.run(), name=type(c).__name__) for c in controllers]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, asyncio.CancelledError):
                raise result


async def until(client: Client, kind: str, namespace: str | None, name: str,
                holds: Callable[[dict | None], bool], timeout: float = WAIT) -> dict | None:
    """The object (None once gone) as soon as `holds(it)`, waiting on the store's watch."""
    since = str(client.registry.store.rv)
    watch, _ = client.watch(kind, namespace, lambda o: o["metadata"]["name"] == name, since=since)
    try:
        async def wait() -> dict | None:
            while True:
                current = client.get(kind, namespace, name)
                if holds(current):
                    return current
                if await watch.queue.get() is None:
                    raise AssertionError("the watch closed")
        return await asyncio.wait_for(wait(), timeout)
    finally:
        client.unwatch(watch)


def add_node(client: Client, name: str = "node-1", cpu: str = "8", memory: str = "16Gi", pods: int = 110) -> dict:
    """A Ready node with this allocatable, as its kubelet registers it."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return client.create("Node", {"metadata": {"name": name}, "status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})


async def eventually(client: Client, check: Callable[[], object], timeout: float = WAIT) -> object:
    """`check()`'s value as soon as it is true, looked at again after every write to the store."""
    wrote = asyncio.Event()

    def listener(_kind, _event) -> None:
        wrote.set()

    client.registry.store.listeners.append(listener)
    try:
        async def wait() -> object:
            while not (found := check()):
                wrote.clear()
                await wrote.wait()
            return found
        return await asyncio.wait_for(wait(), timeout)
    finally:
        client.registry.store.listeners.remove(listener)


def gone(obj: dict | None) -> bool:
    return obj is None


def condition(obj: dict | None, kind: str, status: str = "True") -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == status:
            return c
    return None
