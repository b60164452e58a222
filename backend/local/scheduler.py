"""The embedded cluster's scheduler: one node, its allocatable CPU, memory and pods.

As the default scheduler's NodeResourcesFit: a pod is bound only when its requests fit in what
the node has left after the pods already bound (a pod without requests needs only a pod slot,
as BestEffort pods do); the others stay Pending with PodScheduled=False, reason Unschedulable,
and a FailedScheduling event saying what is short, and are bound in order as soon as capacity
frees up. No process starts for a pod that is not bound.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from backend.quantity import quantity

@dataclass(frozen=True)
class Requests:
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes

    @classmethod
    def of(cls, requests: dict | None) -> "Requests":
        requests = requests or {}
        return cls(quantity(requests.get("cpu")), quantity(requests.get("memory")))


class Scheduler:
    def __init__(self, cpu: float, memory: float, pods: int,
                 unschedulable: Callable[[str, str], None] | None = None):
        self.cpu, self.memory, self.pods = cpu, memory, pods
        self.bound: dict[str, Requests] = {}
        self._waiting: OrderedDict[str, tuple[Requests, asyncio.Future]] = OrderedDict()
        self._unschedulable = unschedulable or (lambda pod, why: None)

    def _why_not(self, need: Requests) -> str | None:
        used_cpu = sum(r.cpu for r in self.bound.values())
        used_memory = sum(r.memory for r in self.bound.values())
        short = []
        if need.cpu and used_cpu + need.cpu > self.cpu + 1e-9:
            short.append("Insufficient cpu")
        if need.memory and used_memory + need.memory > self.memory:
            short.append("Insufficient memory")
        if len(self.bound) + 1 > self.pods:
            short.append("Too many pods")
        if not short:
            return None
        return (f"0/1 nodes are available: {', '.join(f'1 {s}' for s in short)}. preemption: 0/1 nodes are "
                "available: 1 No preemption victims found for incoming pod.")

    async def bind(self, pod: str, need: Requests) -> None:
        """Return once `pod` is bound to the node (at once if it fits and nobody waits before it)."""
        why = None if self._waiting else self._why_not(need)
        if why is None and not self._waiting:
            self.bound[pod] = need
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting[pod] = (need, future)
        self._unschedulable(pod, why or self._why_not(need) or "waiting for pods queued before it")
        try:
            await future
        finally:
            self._waiting.pop(pod, None)

    def is_waiting(self, pod: str) -> bool:
        return pod in self._waiting

    def release(self, pod: str) -> None:
        """A bound pod ended (or a waiting one went away): bind whoever fits now, in order."""
        self.bound.pop(pod, None)
        queued = self._waiting.pop(pod, None)
        if queued is not None and not queued[1].done():
            queued[1].cancel()
        for name, (need, future) in list(self._waiting.items()):
            if future.done():
                continue
            if self._why_not(need) is not None:
                break  # first come, first served: no pod overtakes the one at the head
            self.bound[name] = need
            future.set_result(None)
