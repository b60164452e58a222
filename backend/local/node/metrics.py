"""metrics.k8s.io for the embedded cluster's node, read from /proc (what metrics-server reads from
the kubelet): a pod's CPU is its process's CPU time over the time since the previous reading (its
whole life on the first), memory its resident set; the node's from /proc/stat and /proc/meminfo.

The previous readings are a `CpuRates` the control plane owns (one per controller process, gone
with it), at most `CpuRates.LIMIT` of them: a pod that ended is simply read no more, and its
reading is the first to go. A process is known by its pid and start time, so a pid the kernel
hands out again starts afresh instead of inheriting the dead process's CPU time.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import Any, Hashable

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


class CpuRates:
    """CPU seconds per second between readings, from each process's (or node's) previous one."""

    LIMIT = 4096  # a 512-rank job's pods many times over; each reading is a few dozen bytes

    def __init__(self, limit: int = LIMIT, clock=time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self._previous: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()  # -> (time, cpu seconds)

    def __len__(self) -> int:
        return len(self._previous)

    def rate(self, key: Hashable, cpu_seconds: float, since: float) -> float:
        """The rate since `key`'s previous reading; on the first (or one a blink ago), over its
        whole life of `since` seconds."""
        now = self.clock()
        last = self._previous.pop(key, None)
        self._previous[key] = (now, cpu_seconds)
        if len(self._previous) > self.limit:
            self._previous.popitem(last=False)  # the least recently read
        if last is None or now - last[0] <= 0.05:
            return cpu_seconds / max(since, 0.05)
        return max(0.0, (cpu_seconds - last[1]) / (now - last[0]))


def _window(rate: float) -> str:
    return f"{int(rate * 1e9)}n"


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pod_metrics(pod: dict[str, Any], pid: int | None, rates: CpuRates) -> dict[str, Any] | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/statm") as f:
            rss = int(f.read().split()[1]) * _PAGE
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS
    started = int(fields[19])
    age = uptime - started / _TICKS
    meta = pod["metadata"]
    return {"kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": meta.get("labels", {}),
                         "creationTimestamp": _stamp()},
            "timestamp": _stamp(), "window": "10s",
            "containers": [{"name": "node", "usage": {"cpu": _window(rates.rate(("pod", pid, started), cpu, age)),
                                                      "memory": f"{rss // 1024}Ki"}}]}


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes."""
    found = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found


def node_metrics(name: str, rates: CpuRates) -> dict[str, Any]:
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    busy = sum(int(v) for i, v in enumerate(parts[:8]) if i not in (3, 4)) / _TICKS
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    memory = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            memory[key] = int(rest.split()[0])
    used = memory.get("MemTotal", 0) - memory.get("MemAvailable", 0)
    return {"kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                         "creationTimestamp": _stamp()},
            "timestamp": _stamp(), "window": "10s",
            "usage": {"cpu": _window(rates.rate(("node", name), busy, uptime)), "memory": f"{used}Ki"}}
