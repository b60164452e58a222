"""Pods stuck Terminating on a lost node, failed and removed: Kueue's FailureRecoveryPolicy
(kubernetes-sigs/kueue pkg/controller/failurerecovery/pod_termination_controller.go), which this
cluster runs as a real one would have Kueue run it.

A pod deleted on a node that no longer answers stays Terminating: no kubelet confirms its end,
and Kubernetes keeps it so on purpose (it cannot know that the processes stopped). A Job counts
such a pod as failed, but waits for it to be gone before it is Failed (KEP-4368: the terminal
condition follows the last terminating pod), and a JobSet restarts its group only on a Failed
Job (kubernetes-sigs/jobset#576): a training job waits for the node to come back.

A pod annotated `kueue.x-k8s.io/safe-to-forcefully-delete: "true"` (the lesson's runtime says
so: its workers resume from checkpoints, nothing is lost by not waiting) that is still there
`forcefulTerminationGracePeriod` (1 min; this cluster's --forceful-termination-grace-period)
after its deletionTimestamp, on a node tainted `node.kubernetes.io/unreachable`, is marked
Failed (unless it ended already) with a KueueFailureRecovery condition, a KueueForcefullyDeleted
event, and deleted with no grace: its Job fails, and the JobSet's failure policy takes over.
"""

from __future__ import annotations

import calendar
import time
from typing import Callable, Hashable

from backend.local.controllers.base import Controller, namespaced_key
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.informer import DELETED
from backend.local.registry.strategies.pods import UNREACHABLE
from backend.local.registry.strategy import Obj

SAFE_TO_DELETE = "kueue.x-k8s.io/safe-to-forcefully-delete"
CONDITION, REASON = "KueueFailureRecovery", "KueueForcefullyDeleted"


def eligible(pod: Obj) -> bool:
    meta = pod["metadata"]
    return (meta.get("annotations") or {}).get(SAFE_TO_DELETE) == "true" and bool(meta.get("deletionTimestamp"))


def unreachable(node: Obj | None) -> bool:
    return any(t.get("key") == UNREACHABLE for t in ((node or {}).get("spec") or {}).get("taints") or [])


def _epoch(stamp: str) -> float:
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


class FailureRecoveryController(Controller):
    name = "failure-recovery-pod-termination-controller"

    def __init__(self, client: Client, record: Record, grace: float = 60.0, clock: Callable[[], float] = time.time):
        """`grace`: forcefulTerminationGracePeriod; `clock`: wall time (a deletionTimestamp's)."""
        super().__init__(client)
        self.record, self.grace, self.clock = record, grace, clock
        self.pods = self.inform("Pod", self._pod_changed)
        self.nodes = self.inform("Node", self._node_changed)

    def _pod_changed(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        if event_type != DELETED and eligible(pod) and (old is None or not eligible(old)):
            self.queue.add(namespaced_key(pod))

    def _node_changed(self, event_type: str, node: Obj, old: Obj | None) -> None:
        if event_type == DELETED or not unreachable(node) or unreachable(old):
            return
        for pod in self.pods.items():
            if (pod.get("spec") or {}).get("nodeName") == node["metadata"]["name"] and eligible(pod):
                self.queue.add(namespaced_key(pod))

    async def reconcile(self, key: Hashable) -> float | None:
        namespace, name = key
        pod = self.client.get("Pod", namespace, name)
        if pod is None or not eligible(pod):
            return None
        left = _epoch(pod["metadata"]["deletionTimestamp"]) + self.grace - self.clock()
        if left > 0:
            return left
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        if not unreachable(self.nodes.get(None, node_name)):
            return None  # looked at again when the node becomes unreachable
        total = int(pod["metadata"].get("deletionGracePeriodSeconds") or 0) + self.grace
        message = (f"Pod forcefully terminated after {total:g}s grace period due to unreachable node `{node_name}` "
                   f"(triggered by `{SAFE_TO_DELETE}` annotation)")

        def failed(live: Obj) -> None:
            status = live.setdefault("status", {})
            if status.get("phase") not in ("Succeeded", "Failed"):
                status["phase"] = "Failed"
            status.setdefault("conditions", []).append({"type": CONDITION, "status": "True", "reason": REASON,
                                                        "message": message,
                                                        "lastTransitionTime": self.client.now()})
        self.client.mutate("Pod", namespace, name, failed, status=True)
        self.record(pod, "Warning", REASON, message)
        self.client.delete("Pod", namespace, name, grace=0, uid=pod["metadata"]["uid"])
        return None
