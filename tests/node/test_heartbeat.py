"""A kubelet's heartbeat (backend/local/node/heartbeat.py) against the node lifecycle controller,
in-process: a Lease renewed in kube-node-lease (pkg/kubelet/nodelease); renewals that stop turn
the node Unknown and tainted unreachable after the grace period (pkg/controller/nodelifecycle);
a live kubelet whose node was marked so (its heartbeat late on a busy machine) posts Ready again,
as the kubelet's node status sync posts what changed, and the taints come off; its Ready again is
a NodeReady Event, as the kubelet's ReadyCondition setter records a transition
(pkg/kubelet/nodestatus/setters.go), and a first registration records none."""

from __future__ import annotations

import asyncio

from backend.local.controllers.nodelifecycle import NodeLifecycleController
from backend.local.node.heartbeat import LEASE_NAMESPACE, Heartbeat
from backend.local.registry.events import Events
from tests.controlplane import eventually, plane, running

RESOURCES = {"cpu": "2", "memory": "4Gi", "pods": "110"}


def _ready(client) -> str:
    node = client.get("Node", None, "node-1") or {}
    return next((c["status"] for c in (node.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), "")


def _taints(client) -> list[str]:
    return [t["key"] for t in (client.get("Node", None, "node-1") or {}).get("spec", {}).get("taints") or []]


def _node_ready_events(client) -> list[str]:
    return [e["message"] for e in client.list("Event") if e["reason"] == "NodeReady"
            and e["involvedObject"]["name"] == "node-1"]


async def test_a_node_marked_lost_while_its_kubelet_lives_is_ready_again_at_the_next_renewal():
    client = plane()
    events = Events(client, host="test")
    heartbeat = Heartbeat(client, "node-1", RESOURCES, RESOURCES, {}, renew=0.05, record=events.recorder("kubelet"))
    heartbeat.register()
    assert _node_ready_events(client) == []
    assert client.get("Lease", LEASE_NAMESPACE, "node-1")["spec"]["holderIdentity"] == "node-1"
    lifecycle = NodeLifecycleController(client, events.recorder("node-controller"), grace=0.5)
    beating = asyncio.create_task(heartbeat.run())
    try:
        async with running(lifecycle):
            await eventually(client, lambda: _ready(client) == "True")
            beating.cancel()  # the node is lost: no renewal any more
            await eventually(client, lambda: _ready(client) == "Unknown" and
                             "node.kubernetes.io/unreachable" in _taints(client))
            beating = asyncio.create_task(heartbeat.run())  # it was only late
            await eventually(client, lambda: _ready(client) == "True" and not _taints(client))
            assert _node_ready_events(client) == ["Node node-1 status is now: NodeReady"]
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)
