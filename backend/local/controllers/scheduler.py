"""The scheduler (kube-scheduler's default profile, the part one machine's nodes need): a pending
pod is bound to a node through the binding subresource, or told why not.

A pod is pending while it has no spec.nodeName, asks for the default scheduler and is neither
finished nor being deleted; pending pods are tried in the order they were created. Filters, in
upstream's order and words:

- VolumeBinding: each PersistentVolumeClaim the pod mounts must exist, not be going, and be
  Bound ("pod has unbound immediate PersistentVolumeClaims");
- NodeUnschedulable and readiness: a node with spec.unschedulable, or not Ready, is not a
  candidate;
- NodeResourcesFit: the pod's requests (cpu, memory, extended resources; limits stand for
  requests not given) fit in the node's allocatable minus what its bound, unfinished pods
  request, and one pod slot is left.

The fitting node with the most left (LeastAllocated) gets the pod: a Scheduled event, once. A pod
that fits nowhere gets PodScheduled False (Unschedulable) with the reasons counted per node
("0/1 nodes are available: 1 Insufficient cpu. preemption: ...") and a FailedScheduling event,
and is tried again when a pod ends, a node or a claim changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Hashable

from backend.local.controllers import conditions
from backend.local.controllers.base import Controller
from backend.local.registry.events import Record
from backend.local.registry.client import Client
from backend.local.registry.informer import DELETED
from backend.local.registry.status import ApiError
from backend.local.registry.strategy import Obj
from backend.quantity import quantity

SCHEDULER = "default-scheduler"
_PASS = "pending pods"  # the one key: every pending pod, in order
_NOT_HELPFUL = "Preemption is not helpful for scheduling."
_NO_VICTIMS = "No preemption victims found for incoming pod."


def requests_of(pod: Obj) -> dict[str, float]:
    """What a pod asks of a node: its containers' requests (limits for those not requested)."""
    total: Counter[str] = Counter()
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in asked.items():
            total[name] += quantity(value)
    return dict(total)


def pending(pod: Obj) -> bool:
    spec, meta = pod.get("spec") or {}, pod["metadata"]
    return (not spec.get("nodeName") and spec.get("schedulerName", SCHEDULER) == SCHEDULER
            and not meta.get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def node_ready(node: Obj) -> bool:
    return conditions.is_true((node.get("status") or {}).get("conditions"), "Ready")


class Scheduler(Controller):
    name = SCHEDULER

    def __init__(self, client: Client, record: Record):
        super().__init__(client)
        self.record = record
        self.pods = self.inform("Pod", self._pod_changed)
        self.nodes = self.inform("Node", lambda *_: self.queue.add(_PASS))
        self.inform("PersistentVolumeClaim", lambda *_: self.queue.add(_PASS))

    def _pod_changed(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        frees = event_type == DELETED or (old is not None and (old.get("status") or {}).get("phase") !=
                                          (pod.get("status") or {}).get("phase"))
        if pending(pod) or frees:
            self.queue.add(_PASS)

    async def reconcile(self, key: Hashable) -> float | None:
        waiting = sorted((p for p in self.pods.items() if pending(p)),
                         key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                        int(p["metadata"].get("resourceVersion") or 0)))
        for pod in waiting:
            self._schedule(pod)
        return None

    def _schedule(self, pod: Obj) -> None:
        meta = pod["metadata"]
        problem = self._volumes(pod)
        nodes = [n for n in self.nodes.items()]
        if problem is None:
            fits, reasons = self._fit(pod, nodes)
            if fits:
                self._bind(pod, fits)
                return
            counted = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
            message = (f"0/{len(nodes)} nodes are available: {counted}. preemption: 0/{len(nodes)} nodes are "
                       f"available: {len(nodes)} {_NO_VICTIMS}")
        else:
            message = (f"0/{len(nodes)} nodes are available: {problem}. preemption: 0/{len(nodes)} nodes are "
                       f"available: {len(nodes)} {_NOT_HELPFUL}")
        if conditions.find((pod.get("status") or {}).get("conditions"), "PodScheduled", "False") and \
                conditions.find(pod["status"]["conditions"], "PodScheduled")["message"] == message:
            return  # told already; tried again when something changes

        def unschedulable(live: Obj) -> None:
            found = live.setdefault("status", {}).setdefault("conditions", [])
            conditions.set_condition(found, "PodScheduled", "False", "Unschedulable", message, self.client.now())
        self.client.mutate("Pod", meta["namespace"], meta["name"], unschedulable, status=True)
        self.record(pod, "Warning", "FailedScheduling", message)

    def _volumes(self, pod: Obj) -> str | None:
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim_name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim_name is None:
                continue
            claim = self.client.peek("PersistentVolumeClaim", pod["metadata"]["namespace"], claim_name)
            if claim is None:
                return f'persistentvolumeclaim "{claim_name}" not found'
            if claim["metadata"].get("deletionTimestamp"):
                return f'persistentvolumeclaim "{claim_name}" is being deleted'
            if (claim.get("status") or {}).get("phase") != "Bound":
                return "pod has unbound immediate PersistentVolumeClaims"
        return None

    def _fit(self, pod: Obj, nodes: list[Obj]) -> tuple[Obj | None, Counter[str]]:
        need = requests_of(pod)
        reasons: Counter[str] = Counter()
        best, best_left = None, -1.0
        for node in nodes:
            if (node.get("spec") or {}).get("unschedulable"):
                reasons["node(s) were unschedulable"] += 1
                continue
            if not node_ready(node):
                reasons["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"] += 1
                continue
            left = self._free(node)
            short = [name for name, amount in need.items() if amount > left.get(name, 0.0) + 1e-9]
            if left.get("pods", 0) < 1:
                short.append("pods")
            if short:
                for name in short:
                    reasons["Too many pods" if name == "pods" else f"Insufficient {name}"] += 1
                continue
            room = sum(left.get(r, 0.0) / max(self._allocatable(node).get(r, 1.0), 1e-9) for r in ("cpu", "memory"))
            if room > best_left:
                best, best_left = node, room
        return best, reasons

    @staticmethod
    def _allocatable(node: Obj) -> dict[str, float]:
        return {k: quantity(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}

    def _free(self, node: Obj) -> dict[str, float]:
        left = self._allocatable(node)
        name = node["metadata"]["name"]
        for pod in self.pods.items():
            if (pod.get("spec") or {}).get("nodeName") != name or \
                    (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            left["pods"] = left.get("pods", 0.0) - 1
            for resource, amount in requests_of(pod).items():
                left[resource] = left.get(resource, 0.0) - amount
        return left

    def _bind(self, pod: Obj, node: Obj) -> None:
        meta, node_name = pod["metadata"], node["metadata"]["name"]
        try:
            bound = self.client.bind(meta["namespace"], meta["name"], node_name)
        except ApiError as exc:
            if exc.code in (404, 409):
                return  # deleted, or bound, meanwhile
            raise
        self.pods.cache[(meta["namespace"], meta["name"])] = bound  # counted before the informer hears it
        self.record(bound, "Normal", "Scheduled", f"Successfully assigned {meta['namespace']}/{meta['name']} to "
                                                  f"{node_name}")
