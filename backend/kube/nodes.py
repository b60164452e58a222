"""The cluster's nodes and Events as `KubeCluster` watches them, and cordoning a node.

A node's summary is `kubectl describe node`'s: its Node (Ready, cordoned, taints, allocatable)
and what the unfinished pods bound to it request ("Allocated resources", every namespace's pods,
requests counted as the scheduler counts them: backend/quantity.py). So one node stream is two
list-then-watches, Nodes and every namespace's Pods, merged: a summary is sent when the node or a
pod bound to it changes what it shows, never on a timer.

Events are listed then watched in the cockpit's namespace and, where that is another, in
"default" too for those about Nodes (client-go's recorder puts a cluster-scoped object's Events
there). Cordoning is kubectl cordon's patch of spec.unschedulable.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from backend.cluster import ClusterError, NotFound
from backend.kube.pods import parse_time
from backend.kube.resources import ALL_NAMESPACES, Resources
from backend.kube.threads import Ended, cancel_all, pump
from backend.kube.watcher import WatchEvent, object_key
from backend.kube.watches import Watches
from backend.models import GPU, ClusterEvent, NodeEvent, NodeSummary, PodEventType, Taint
from backend.quantity import allocatable, requests_of

_FINISHED = ("Succeeded", "Failed")


def summarize_node(raw: dict, bound: dict[str, dict[str, float]] | None = None) -> NodeSummary:
    """A Node as the cockpit shows it; `bound`: what each unfinished pod bound to it requests."""
    spec, status = raw.get("spec") or {}, raw.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    offers = allocatable(raw)
    asked = list((bound or {}).values())
    return NodeSummary(
        name=(raw.get("metadata") or {}).get("name", ""),
        ready=ready.get("status") or "Unknown", ready_reason=ready.get("reason") or "",
        ready_message=ready.get("message") or "", ready_since=parse_time(ready.get("lastTransitionTime")),
        unschedulable=bool(spec.get("unschedulable")),
        taints=[Taint(key=t.get("key", ""), effect=t.get("effect", ""), value=t.get("value") or "",
                      added=parse_time(t.get("timeAdded"))) for t in spec.get("taints") or []],
        gpus=int(offers.get(GPU, 0)), cpu=offers.get("cpu", 0.0), memory=offers.get("memory", 0.0),
        max_pods=int(offers.get("pods", 0)),
        gpus_used=int(sum(r.get(GPU, 0.0) for r in asked)), cpu_requested=sum(r.get("cpu", 0.0) for r in asked),
        memory_requested=sum(r.get("memory", 0.0) for r in asked), pods=len(asked))


def event_from(raw: dict) -> ClusterEvent:
    involved = raw.get("involvedObject") or {}
    first = parse_time(raw.get("eventTime") or raw.get("firstTimestamp"))
    return ClusterEvent(
        reason=raw.get("reason") or "", message=raw.get("message") or "", type=raw.get("type") or "Normal",
        kind=involved.get("kind") or "", name=involved.get("name") or "", namespace=involved.get("namespace") or "",
        source=(raw.get("source") or {}).get("component") or raw.get("reportingComponent") or "",
        first=first, last=parse_time(raw.get("lastTimestamp")) or first, count=int(raw.get("count") or 1))


class NodeOps:
    def __init__(self, resources: Resources, watches: Watches) -> None:
        self.resources = resources
        self.watches = watches

    async def watch(self) -> AsyncIterator[NodeEvent]:
        """Every node as ADDED once both watches have listed, then a MODIFIED whenever what it
        shows changes, DELETED when it goes."""
        queue: asyncio.Queue = asyncio.Queue()
        tasks = [pump(self.watches.watch("Node"), queue, "nodes"),
                 pump(self.watches.watch("Pod", namespace=ALL_NAMESPACES), queue, "pods")]
        nodes: dict[str, dict] = {}
        bound: dict[str, dict[str, dict[str, float]]] = {}  # node -> pod -> its requests
        where: dict[str, str] = {}  # pod -> the node it counts on
        shown: dict[str, NodeSummary] = {}
        synced: set[str] = set()
        try:
            while True:
                source, item = await queue.get()
                if isinstance(item, Ended):
                    raise item.error or ClusterError("the node watch ended")
                if item.type == "SYNCED":
                    synced.add(source)
                    touched = set(nodes) if len(synced) == 2 else set()
                elif source == "nodes":
                    touched = {_node_changed(nodes, item)}
                else:
                    touched = _pod_changed(bound, where, item)
                if len(synced) < 2:
                    continue
                for name in sorted(touched):
                    if name not in nodes:
                        if shown.pop(name, None) is not None:
                            yield NodeEvent(type=PodEventType.DELETED, node=NodeSummary(name=name))
                        continue
                    summary = summarize_node(nodes[name], bound.get(name))
                    if shown.get(name) != summary:
                        kind = PodEventType.MODIFIED if name in shown else PodEventType.ADDED
                        shown[name] = summary
                        yield NodeEvent(type=kind, node=summary)
        finally:
            await cancel_all(tasks)

    async def events(self) -> AsyncIterator[ClusterEvent]:
        """The Events there are, then each new one and each repeat (its count and last time)."""
        queue: asyncio.Queue = asyncio.Queue()
        tasks = [pump(self.watches.watch("Event"), queue, "events")]
        if self.resources.namespace != "default":
            tasks.append(pump(self.watches.watch("Event", field_selector="involvedObject.kind=Node",
                                                 namespace="default"), queue, "node-events"))
        try:
            while True:
                _, item = await queue.get()
                if isinstance(item, Ended):
                    raise item.error or ClusterError("the event watch ended")
                if item.type in ("ADDED", "MODIFIED"):
                    yield event_from(item.object)
        finally:
            await cancel_all(tasks)

    async def list_events(self) -> list[ClusterEvent]:
        """The Events there are now: the namespace's, and the Nodes' (in default) where it is another."""
        raw = await self.resources.list("Event")
        if self.resources.namespace != "default":
            raw += [e for e in await self.resources.list("Event", namespace="default")
                    if (e.get("involvedObject") or {}).get("kind") == "Node"]
        return [event_from(e) for e in raw]

    async def cordon(self, name: str, unschedulable: bool) -> None:
        """kubectl cordon (uncordon): the Node's spec.unschedulable set (cleared)."""
        try:
            await self.resources.patch("Node", name, {"spec": {"unschedulable": True if unschedulable else None}})
        except NotFound:
            raise NotFound(f"node {name} not found") from None


def _node_changed(nodes: dict[str, dict], item: WatchEvent) -> str:
    name = item.object["metadata"]["name"]
    if item.type == "DELETED":
        nodes.pop(name, None)
    else:
        nodes[name] = item.object
    return name


def _pod_changed(bound: dict[str, dict[str, dict[str, float]]], where: dict[str, str], item: WatchEvent) -> set[str]:
    """The nodes whose pods' requests changed: a pod bound, finished or gone."""
    key = object_key(item.object)
    before = where.pop(key, None)
    if before is not None:
        bound.get(before, {}).pop(key, None)
    node = (item.object.get("spec") or {}).get("nodeName")
    phase = (item.object.get("status") or {}).get("phase")
    if item.type != "DELETED" and node and phase not in _FINISHED:
        where[key] = node
        bound.setdefault(node, {})[key] = requests_of(item.object)
    return {n for n in (before, where.get(key)) if n}
