"""A kubelet's word about its node: the Node it registers, and the Lease it renews as its heartbeat
(pkg/kubelet/kubelet_node_status.go, pkg/kubelet/nodelease).

- Registration: the Node with the kubelet's labels (kubernetes.io/hostname, os, arch, the zone,
  GPU feature discovery's), capacity and allocatable (cpu, memory, pods, nvidia.com/gpu),
  conditions (Ready, and no memory, disk or PID pressure), addresses and versions. A Node that
  exists (the node came back) gets its labels merged and its status replaced: Ready again. Its
  spec (cordoned or not, taints) is not the kubelet's: the node lifecycle controller takes its
  taints off once it is Ready.
- Heartbeat: a Lease named after the node in kube-node-lease, its renewTime renewed every
  `renew` seconds; when renewals stop (the node failed), the node lifecycle controller marks the
  node Unknown after its grace period. A live kubelet whose node was marked so (late on a busy
  machine) posts Ready again at its next renewal.
- Events: a Ready condition that turns True again (a node restored, or taken for lost while it
  lived) is recorded as NodeReady, "Node <name> status is now: NodeReady", as the kubelet's
  ReadyCondition setter (pkg/kubelet/nodestatus/setters.go) records a transition; the first
  registration, which has no condition to turn, records none.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import time

from backend.local.node.network import ADDRESS
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.status import ApiError

log = logging.getLogger("kfcockpit.kubelet")

Obj = dict
VERSION = "v1.36.0-kfcockpit"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40  # the kubelet's nodeLeaseDurationSeconds
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONE = "kfcockpit-local"  # one machine, one zone


def micro_time(epoch: float) -> str:
    """A metav1.MicroTime (a Lease's renewTime)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1e6):06d}Z"


class Heartbeat:
    def __init__(self, client: Client, name: str, capacity: dict[str, str], allocatable: dict[str, str],
                 labels: dict[str, str], problem: str = "", renew: float = 10.0, record: Record | None = None):
        self.client, self.name, self.renew, self.record = client, name, renew, record
        self.capacity, self.allocatable, self.labels, self.problem = capacity, allocatable, labels, problem

    def register(self) -> None:
        uname = platform.uname()
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": uname.machine.replace("x86_64", "amd64").replace("aarch64", "arm64"),
                  ZONE_LABEL: ZONE, **self.labels}
        status = {"capacity": dict(self.capacity), "allocatable": dict(self.allocatable),
                  "conditions": self._conditions(),
                  "addresses": [{"type": "InternalIP", "address": ADDRESS},
                                {"type": "Hostname", "address": self.name}],  # as kind's nodes
                  "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                  "nodeInfo": {"kubeletVersion": VERSION, "osImage": platform.platform(),
                               "kernelVersion": uname.release, "operatingSystem": "linux",
                               "architecture": uname.machine, "containerRuntimeVersion": "process://",
                               "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""}}
        live = self.client.get("Node", None, self.name)
        if live is None:
            self.client.create("Node", {"metadata": {"name": self.name, "labels": labels}, "spec": {},
                                        "status": status})
        else:
            live["metadata"]["labels"] = {**(live["metadata"].get("labels") or {}), **labels}
            live = self.client.update("Node", live)
            was_ready = _ready(live)
            live["status"] = status
            self._ready_again(self.client.update_status("Node", live), was_ready)
        self.beat()

    def _conditions(self) -> list[Obj]:
        now = self.client.now()
        ready = "kubelet is posting ready status" + (f"; {self.problem}" if self.problem else "")
        return [{"type": kind, "status": "False", "reason": reason, "message": message,
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
                for kind, reason, message in (
                    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))] + [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ready,
             "lastHeartbeatTime": now, "lastTransitionTime": now}]

    def beat(self) -> None:
        """Renew the node's Lease (made, owned by the Node, the first time)."""
        now = micro_time(self.client.registry.clock())
        lease = self.client.get("Lease", LEASE_NAMESPACE, self.name)
        if lease is None:
            node = self.client.peek("Node", None, self.name) or {"metadata": {}}
            self.client.create("Lease", {"metadata": {
                "name": self.name, "namespace": LEASE_NAMESPACE,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": self.name,
                                     "uid": node["metadata"].get("uid", "")}]},
                "spec": {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                         "renewTime": now}})
            return
        lease["spec"]["renewTime"] = now
        self.client.update("Lease", lease)

    async def run(self) -> None:
        """Renew the Lease until cancelled (the node stops, or fails)."""
        while True:
            await asyncio.sleep(self.renew)
            try:
                self.beat()
                self.post_ready()
            except ApiError as exc:  # the API refused once (a conflict): the next renewal tries again
                log.warning("node %s: renewing its lease failed: %s", self.name, exc.message)

    def post_ready(self) -> None:
        """The node's conditions posted again where they say other than Ready, as the kubelet's
        node status sync posts what changed: a node the node lifecycle controller took for lost
        (a heartbeat late on a busy machine, the event loop held up past the grace period) is
        Ready again at the next renewal, and the controller takes its taints off."""
        node = self.client.peek("Node", None, self.name)
        if node is None or _ready(node):
            return
        conditions = (node.get("status") or {}).get("conditions") or []
        log.warning("node %s: its status said %s; posting Ready again", self.name,
                    next((c.get("status") for c in conditions if c.get("type") == "Ready"), "nothing"))
        live = self.client.get("Node", None, self.name)
        live["status"]["conditions"] = self._conditions()
        self._ready_again(self.client.update_status("Node", live), was_ready=False)

    def _ready_again(self, node: Obj, was_ready: bool) -> None:
        if self.record is not None and not was_ready:
            self.record(node, "Normal", "NodeReady", f"Node {self.name} status is now: NodeReady")


def _ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
