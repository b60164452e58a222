"""The node lifecycle controller (kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go):
a node's health from its kubelet's heartbeat, and the taints that follow from it.

- Health: a node's probe time is when its Lease's renewal (or its Ready condition's heartbeat) was
  last seen to change, by this controller's clock (not the kubelet's: clocks may differ). When
  none was seen for --node-monitor-grace-period, its Ready, MemoryPressure, DiskPressure and
  PIDPressure conditions turn Unknown ("NodeStatusUnknown", "Kubelet stopped posting node
  status."), a NodeNotReady event says so, and its pods are marked not Ready (MarkPodsNotReady;
  this cluster's own controller pod aside: the control plane outlives any node).
  Upstream looks every --node-monitor-period (5 s); here each node is looked at when its grace
  runs out, which is when that loop would next find it late.
- NoExecute taints (doNoExecuteTaintingPass): Ready Unknown taints the node
  `node.kubernetes.io/unreachable:NoExecute`, Ready False `node.kubernetes.io/not-ready:NoExecute`,
  with the time added; Ready again takes them off. What they set off is the taint eviction
  controller's (tainteviction.py).
- NoSchedule taints (TaintNodesByCondition, doNoScheduleTaintingPass): the same conditions as
  NoSchedule taints, and `node.kubernetes.io/unschedulable:NoSchedule` while the node is
  cordoned (spec.unschedulable), so the scheduler's TaintToleration keeps new pods off.
"""

from __future__ import annotations

import time
from typing import Callable, Hashable

from backend.local.controllers import conditions
from backend.local.controllers.base import Controller
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.informer import DELETED
from backend.local.registry.strategies.pods import CONTROLLER_POD_ANNOTATION, NOT_READY, UNREACHABLE
from backend.local.registry.strategy import Obj

NODE_CONTROLLER = "node-controller"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
LEASE_NAMESPACE = "kube-node-lease"
_HEALTH = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
_OURS = {NOT_READY, UNREACHABLE, UNSCHEDULABLE}


def ready_status(node: Obj) -> str:
    """The node's Ready condition's status: "True", "False" or "Unknown" (none posted yet)."""
    found = conditions.find((node.get("status") or {}).get("conditions"), "Ready")
    return (found or {}).get("status") or "Unknown"


def wanted_taints(node: Obj) -> list[tuple[str, str]]:
    """(key, effect) of the taints this controller keeps on the node, by its state."""
    ready = ready_status(node)
    taints = []
    if ready == "Unknown":
        taints += [(UNREACHABLE, "NoExecute"), (UNREACHABLE, "NoSchedule")]
    elif ready == "False":
        taints += [(NOT_READY, "NoExecute"), (NOT_READY, "NoSchedule")]
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append((UNSCHEDULABLE, "NoSchedule"))
    return taints


class NodeLifecycleController(Controller):
    name = NODE_CONTROLLER

    def __init__(self, client: Client, record: Record, grace: float = 50.0,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(client)
        self.record, self.grace, self.clock = record, grace, clock
        self.probed: dict[str, float] = {}  # node -> when its heartbeat was last seen to move
        self.known: set[str] = set()
        self.nodes = self.inform("Node", self._node_changed)
        self.inform("Lease", self._lease_changed, namespace=LEASE_NAMESPACE)

    def _node_changed(self, event_type: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if event_type == DELETED:
            self.probed.pop(name, None)
            self.known.discard(name)
            return
        beat = (conditions.find((node.get("status") or {}).get("conditions"), "Ready") or {})
        before = (conditions.find(((old or {}).get("status") or {}).get("conditions"), "Ready") or {})
        if old is None or beat.get("lastHeartbeatTime") != before.get("lastHeartbeatTime") or \
                (beat.get("status") == "True" and before.get("status") != "True"):
            self.probed[name] = self.clock()
        self.queue.add(name)

    def _lease_changed(self, event_type: str, lease: Obj, old: Obj | None) -> None:
        if event_type == DELETED:
            return
        renewed = (lease.get("spec") or {}).get("renewTime")
        if old is None or renewed != (old.get("spec") or {}).get("renewTime"):
            self.probed[lease["metadata"]["name"]] = self.clock()
            self.queue.add(lease["metadata"]["name"])

    async def reconcile(self, key: Hashable) -> float | None:
        name = str(key)
        node = self.client.get("Node", None, name)
        if node is None:
            return None
        if name not in self.known:
            self.known.add(name)
            self.record(node, "Normal", "RegisteredNode", f"Registered Node {name} in Controller")
        probed = self.probed.setdefault(name, self.clock())  # "Missing timestamp for Node. Assuming now"
        late = self.clock() - probed - self.grace
        if late > 0:
            node = self._unknown(node)
        self._taint(node)
        return None if late > 0 else 0.001 - late  # when its grace runs out, unless it beats before

    def _unknown(self, node: Obj) -> Obj:
        """tryUpdateNodeHealth past the grace period: every health condition Unknown."""
        found = node.setdefault("status", {}).setdefault("conditions", [])
        was_ready = ready_status(node)
        now = self.client.now()
        changed = False
        for kind in _HEALTH:
            current = conditions.find(found, kind)
            if current is None:
                found.append({"type": kind, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                              "message": "Kubelet never posted node status.", "lastHeartbeatTime":
                              node["metadata"].get("creationTimestamp"), "lastTransitionTime": now})
                changed = True
            elif current.get("status") != "Unknown":
                current.update(status="Unknown", reason="NodeStatusUnknown",
                               message="Kubelet stopped posting node status.", lastTransitionTime=now)
                changed = True
        if not changed:
            return node
        node = self.client.update_status("Node", node)
        if was_ready == "True":
            name = node["metadata"]["name"]
            self.record(node, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady")
            self._mark_pods_not_ready(name)
        return node

    def _mark_pods_not_ready(self, node: str) -> None:
        """MarkPodsNotReady: the pods of a node that stopped answering are not Ready."""
        for pod in self.client.list("Pod", match=lambda p: (p.get("spec") or {}).get("nodeName") == node):
            meta = pod["metadata"]
            if CONTROLLER_POD_ANNOTATION in (meta.get("annotations") or {}):
                continue

            def not_ready(live: Obj) -> object:
                ready = conditions.find((live.get("status") or {}).get("conditions"), "Ready")
                if ready is None or ready.get("status") == "False":
                    return False
                ready.update(status="False", lastTransitionTime=self.client.now())
            if self.client.mutate("Pod", meta["namespace"], meta["name"], not_ready, status=True) is not None:
                self.record(pod, "Warning", "NodeNotReady", "Node is not ready")

    def _taint(self, node: Obj) -> None:
        """Make the node's own taints (the ones this controller manages) what its state calls for;
        another's taints are left as they are."""
        wanted = wanted_taints(node)
        taints = (node.get("spec") or {}).get("taints") or []
        have = [(t.get("key"), t.get("effect")) for t in taints if t.get("key") in _OURS]
        if sorted(have) == sorted(wanted):
            return
        now = self.client.now()

        def retaint(live: Obj) -> None:
            spec = live.setdefault("spec", {})
            current = spec.get("taints") or []
            kept = [t for t in current if t.get("key") not in _OURS or (t.get("key"), t.get("effect")) in wanted]
            for key, effect in wanted:
                if not any((t.get("key"), t.get("effect")) == (key, effect) for t in kept):
                    kept.append({"key": key, "effect": effect, **({"timeAdded": now} if effect == "NoExecute"
                                                                 else {})})
            if kept:
                spec["taints"] = kept
            else:
                spec.pop("taints", None)
        self.client.mutate("Node", None, node["metadata"]["name"], retaint)
