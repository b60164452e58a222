"""The taint eviction controller (kubernetes pkg/controller/tainteviction/taint_eviction.go): pods on
a node with NoExecute taints they do not tolerate are deleted.

For each pod bound to a node whose NoExecute taints change (the node lifecycle controller's
`unreachable` or `not-ready`, or anyone's):
- a taint none of its tolerations matches: it is deleted at once;
- all tolerated, some for a while only (tolerationSeconds: the DefaultTolerationSeconds plugin
  gives every pod 300 s of `unreachable` and `not-ready`, this cluster's
  --default-*-toleration-seconds): deleted that many seconds (the least of them) after this
  controller first saw the taint, unless the taint goes first ("Cancelling deletion of Pod");
- tolerated for ever: left alone.
The deletion marks the pod DisruptionTarget (reason DeletionByTaintManager) and deletes it with
its own grace period, with a TaintManagerEviction event: "Marking for deletion Pod ns/name".
On a node that no longer answers, no kubelet confirms that deletion: the pod stays Terminating
(see failurerecovery.py for what ends that).
"""

from __future__ import annotations

import time
from typing import Callable, Hashable

from backend.local.controllers.base import Controller, namespaced_key
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.informer import DELETED
from backend.local.registry.strategy import Obj

CONDITION = ("DisruptionTarget", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def no_execute(node: Obj | None) -> list[Obj]:
    return [t for t in ((node or {}).get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]


def toleration_time(pod: Obj, taints: list[Obj]) -> float | None:
    """Seconds the pod may stay on a node with these NoExecute taints: 0 when one is not
    tolerated, None when all are for ever (getMinTolerationTime: the least tolerationSeconds)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    least: float | None = None
    for taint in taints:
        used = [t for t in tolerations if tolerates(t, taint)]
        if not used:
            return 0.0
        for toleration in used:
            seconds = toleration.get("tolerationSeconds")
            if seconds is not None:
                least = max(0.0, float(seconds)) if least is None else min(least, max(0.0, float(seconds)))
    return least


class TaintEvictionController(Controller):
    name = "taint-eviction-controller"

    def __init__(self, client: Client, record: Record, clock: Callable[[], float] = time.monotonic):
        super().__init__(client)
        self.record, self.clock = record, clock
        self.scheduled: dict[tuple[str, str], float] = {}  # pod -> when its countdown started
        self.pods = self.inform("Pod", self._pod_changed)
        self.nodes = self.inform("Node", self._node_changed)

    def _pod_changed(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        if event_type == DELETED:
            self.scheduled.pop(namespaced_key(pod), None)
        elif (pod.get("spec") or {}).get("nodeName"):
            self.queue.add(namespaced_key(pod))

    def _node_changed(self, event_type: str, node: Obj, old: Obj | None) -> None:
        if event_type != DELETED and no_execute(node) == no_execute(old) and old is not None:
            return
        name = node["metadata"]["name"]
        for pod in self.pods.items():
            if (pod.get("spec") or {}).get("nodeName") == name:
                self.queue.add(namespaced_key(pod))

    async def reconcile(self, key: Hashable) -> float | None:
        namespace, name = key
        pod = self.pods.get(namespace, name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            self.scheduled.pop(key, None)
            return None
        taints = no_execute(self.nodes.get(None, (pod.get("spec") or {}).get("nodeName") or ""))
        seconds = toleration_time(pod, taints) if taints else None
        if seconds is None:
            if self.scheduled.pop(key, None) is not None:
                self.record(pod, "Normal", "TaintManagerEviction", f"Cancelling deletion of Pod {namespace}/{name}")
            return None
        started = self.scheduled.setdefault(key, self.clock())
        left = started + seconds - self.clock()
        if left > 0:
            return left
        self._evict(pod)
        self.scheduled.pop(key, None)
        return None

    def _evict(self, pod: Obj) -> None:
        meta = pod["metadata"]
        kind, reason, message = CONDITION

        def disrupted(live: Obj) -> object:
            found = live.setdefault("status", {}).setdefault("conditions", [])
            if any(c.get("type") == kind for c in found):
                return False
            found.append({"type": kind, "status": "True", "reason": reason, "message": message,
                          "lastTransitionTime": self.client.now()})
        self.client.mutate("Pod", meta["namespace"], meta["name"], disrupted, status=True)
        self.record(pod, "Normal", "TaintManagerEviction",
                    f"Marking for deletion Pod {meta['namespace']}/{meta['name']}")
        self.client.delete("Pod", meta["namespace"], meta["name"], uid=meta["uid"])
