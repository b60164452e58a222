"""Pod CPU and memory from metrics.k8s.io/v1beta1 PodMetrics, what `kubectl top pod` reads.

metrics-server (or the embedded cluster's backend/local/node/metrics.py) serves them as an aggregated
API: get and list only, no watch, so they are read again every few seconds by whoever shows them.
A cluster without metrics-server does not serve the group at all: that is "no metrics" (None),
not an error, so a cockpit polling it stays quiet. Anything else that goes wrong on the wire is the
connection's one-line ClusterError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.kube.connection import MissingType
from backend.kube.pods import parse_time
from backend.models import DRIVER_RANK, LABEL_RANK, PodUsage
from backend.quantity import quantity

if TYPE_CHECKING:
    from typing import Collection

    from backend.kube.resources import Resources

KIND = "PodMetrics"


def usage_from(raw: dict) -> PodUsage | None:
    """One PodMetrics as the pod's summed usage; None when a quantity is not one (a broken
    metrics server's answer is shown as unknown, not as zero)."""
    meta = raw.get("metadata") or {}
    cpu = memory = 0.0
    try:
        for container in raw.get("containers") or []:
            usage = container.get("usage") or {}
            cpu += quantity(usage.get("cpu"))
            memory += quantity(usage.get("memory"))
    except ValueError:
        return None
    return PodUsage(pod=meta.get("name", ""), cpu_cores=cpu, memory_bytes=memory,
                    at=parse_time(raw.get("timestamp")))


def rank_selector(ranks: "Collection[int]") -> str:
    """The pods of these ranks (their completion index; a RayJob driver's is "driver"): a job
    of 512 ranks shows a few, and metrics-server samples every pod it lists."""
    values = ",".join("driver" if rank == DRIVER_RANK else str(rank) for rank in sorted(ranks))
    return f"{LABEL_RANK} in ({values})"


async def pod_usage(resources: "Resources", selectors: list[str]) -> dict[str, PodUsage] | None:
    """Usage of the pods the label selectors match (their union), by pod name; None when the
    cluster serves no metrics.k8s.io. A pod metrics-server has not sampled yet is absent."""
    found: dict[str, PodUsage] = {}
    for selector in selectors:
        try:
            items = await resources.list(KIND, label_selector=selector)
        except MissingType:
            return None
        for raw in items:
            usage = usage_from(raw)
            if usage is not None and usage.pod:
                found[usage.pod] = usage
    return found
