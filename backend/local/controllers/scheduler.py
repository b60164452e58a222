"""The scheduler (kube-scheduler's default profile): a pending pod is bound to a node through the
binding subresource, or told why not, as upstream words it.

A pod is pending while it has no spec.nodeName, asks for the default scheduler and is neither
finished nor being deleted; pending pods are tried in the order they were created, each seeing the
pods placed before it. For each:

- PreFilter (VolumeBinding): each claim it mounts must exist and not be going; one not bound
  whose class binds Immediately fails the pod ("pod has unbound immediate PersistentVolumeClaims");
  one whose class waits for its first consumer (WaitForFirstConsumer) is provisioned for the node
  the pod is placed on.
- Filters (placement.py, in upstream's order) on every node; Score: NodeResourcesFit's
  LeastAllocated (the most cpu and memory left), ties to the first node by name.
- Bind: the pod's node through pods/binding, with a Scheduled event. A pod whose claim waits for
  its first consumer is assumed on its node (its requests counted there) while the claim is
  annotated `volume.kubernetes.io/selected-node` and provisioned; it is bound once the claim is
  Bound (upstream's PreBind waits for the same).
- A pod that fits nowhere gets PodScheduled False (Unschedulable) and a FailedScheduling event:
  "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: },
  2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 1 Preemption is not
  helpful for scheduling, 2 No preemption victims found for incoming pod." (FitError: the reasons
  counted over the nodes and sorted as text); it is tried again when a pod ends, a node or a
  claim changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Hashable

from backend.local.controllers import conditions
from backend.local.controllers.base import Controller
from backend.local.controllers.placement import SELECTED_NODE, Snapshot, claims, room, verdict
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.informer import DELETED
from backend.local.registry.status import ApiError
from backend.local.registry.strategy import Obj

SCHEDULER = "default-scheduler"
_PASS = "pending pods"  # the one key: every pending pod, in order
_NOT_HELPFUL = "Preemption is not helpful for scheduling"
_NO_VICTIMS = "No preemption victims found for incoming pod"


def pending(pod: Obj) -> bool:
    spec, meta = pod.get("spec") or {}, pod["metadata"]
    return (not spec.get("nodeName") and spec.get("schedulerName", SCHEDULER) == SCHEDULER
            and not meta.get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def _histogram(counts: Counter[str]) -> str:
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


class Scheduler(Controller):
    name = SCHEDULER

    def __init__(self, client: Client, record: Record):
        super().__init__(client)
        self.record = record
        self.assumed: dict[tuple[str, str], str] = {}  # pod -> node, while its claims are provisioned
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
        live = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in waiting}
        self.assumed = {k: v for k, v in self.assumed.items() if k in live}
        snapshot = self._snapshot()
        for pod in waiting:
            self._schedule(pod, snapshot)
        return None

    def _snapshot(self) -> Snapshot:
        placed: dict[str, list[Obj]] = {}
        for pod in self.pods.items():
            meta, node = pod["metadata"], (pod.get("spec") or {}).get("nodeName")
            node = node or self.assumed.get((meta["namespace"], meta["name"]))
            if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                placed.setdefault(node, []).append(pod)
        nodes = sorted(self.nodes.items(), key=lambda n: n["metadata"]["name"])
        return Snapshot(nodes, placed, self.client.peek)

    def _schedule(self, pod: Obj, snapshot: Snapshot) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        if key in self.assumed:
            self._bind_when_provisioned(pod, self.assumed[key])
            return
        total = len(snapshot.nodes)
        problem = self._prefilter(pod)
        if problem is not None:
            message = (f"0/{total} nodes are available: {problem}. preemption: 0/{total} nodes are available: "
                       f"{total} {_NOT_HELPFUL}.")
            self._unschedulable(pod, message)
            return
        reasons: Counter[str] = Counter()
        preemption: Counter[str] = Counter()
        best, best_room = None, -1.0
        for node in snapshot.nodes:
            found = verdict(pod, node, snapshot)
            if found is None:
                score = room(pod, node, snapshot)
                if score > best_room:
                    best, best_room = node, score
                continue
            found_reasons, resolvable = found
            reasons.update(found_reasons)
            preemption[_NO_VICTIMS if resolvable else _NOT_HELPFUL] += 1
        if best is None:
            message = (f"0/{total} nodes are available: {_histogram(reasons)}. preemption: 0/{total} nodes are "
                       f"available: {_histogram(preemption)}." if total else
                       "no nodes available to schedule pods")
            self._unschedulable(pod, message)
            return
        node_name = best["metadata"]["name"]
        snapshot.placed.setdefault(node_name, []).append(pod)
        if self._provision_for(pod, node_name):
            self.assumed[key] = node_name
            self._bind_when_provisioned(pod, node_name)
        else:
            self._bind(pod, node_name)

    def _prefilter(self, pod: Obj) -> str | None:
        """VolumeBinding's PreFilter: why no node can take the pod for its claims, or None."""
        for claim_name in claims(pod):
            claim = self.client.peek("PersistentVolumeClaim", pod["metadata"]["namespace"], claim_name)
            if claim is None:
                return f'persistentvolumeclaim "{claim_name}" not found'
            if claim["metadata"].get("deletionTimestamp"):
                return f'persistentvolumeclaim "{claim_name}" is being deleted'
            if (claim.get("status") or {}).get("phase") != "Bound" and not self._waits_for_consumer(claim):
                return "pod has unbound immediate PersistentVolumeClaims"
        return None

    def _waits_for_consumer(self, claim: Obj) -> bool:
        storage_class = self.client.peek("StorageClass", None, (claim.get("spec") or {}).get("storageClassName") or "")
        return (storage_class or {}).get("volumeBindingMode") == "WaitForFirstConsumer"

    def _provision_for(self, pod: Obj, node: str) -> bool:
        """Annotate the pod's unbound claims with the node chosen (the provisioner makes their
        volumes there); whether any is not Bound yet."""
        waiting = False
        for claim_name in claims(pod):
            claim = self.client.peek("PersistentVolumeClaim", pod["metadata"]["namespace"], claim_name) or {}
            if (claim.get("status") or {}).get("phase") == "Bound":
                continue
            waiting = True
            if (claim.get("metadata", {}).get("annotations") or {}).get(SELECTED_NODE) != node:
                def select(live: Obj) -> None:
                    live["metadata"].setdefault("annotations", {})[SELECTED_NODE] = node
                self.client.mutate("PersistentVolumeClaim", pod["metadata"]["namespace"], claim_name, select)
        return waiting

    def _bind_when_provisioned(self, pod: Obj, node: str) -> None:
        bound = all((self.client.peek("PersistentVolumeClaim", pod["metadata"]["namespace"], c) or {})
                    .get("status", {}).get("phase") == "Bound" for c in claims(pod))
        if bound:
            self.assumed.pop((pod["metadata"]["namespace"], pod["metadata"]["name"]), None)
            self._bind(pod, node)

    def _unschedulable(self, pod: Obj, message: str) -> None:
        meta = pod["metadata"]
        if conditions.find((pod.get("status") or {}).get("conditions"), "PodScheduled", "False") and \
                conditions.find(pod["status"]["conditions"], "PodScheduled")["message"] == message:
            return  # told already; tried again when something changes

        def unschedulable(live: Obj) -> None:
            found = live.setdefault("status", {}).setdefault("conditions", [])
            conditions.set_condition(found, "PodScheduled", "False", "Unschedulable", message, self.client.now())
        self.client.mutate("Pod", meta["namespace"], meta["name"], unschedulable, status=True)
        self.record(pod, "Warning", "FailedScheduling", message)

    def _bind(self, pod: Obj, node_name: str) -> None:
        meta = pod["metadata"]
        try:
            bound = self.client.bind(meta["namespace"], meta["name"], node_name)
        except ApiError as exc:
            if exc.code in (404, 409):
                return  # deleted, or bound, meanwhile
            raise
        self.pods.cache[(meta["namespace"], meta["name"])] = bound  # counted before the informer hears it
        self.record(bound, "Normal", "Scheduled", f"Successfully assigned {meta['namespace']}/{meta['name']} to "
                                                  f"{node_name}")
