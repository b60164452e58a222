"""The scheduler's filter plugins (kube-scheduler's default profile, pkg/scheduler/framework/plugins),
pure functions over a pod, a node and a snapshot of what is placed: each returns None when the
node passes, else the reason upstream gives and whether preemption could help (Unschedulable) or
not (UnschedulableAndUnresolvable), which its preemption message counts.

In upstream's order, a node stopping at the first that fails:
- NodeUnschedulable: a cordoned node (spec.unschedulable), unless the pod tolerates
  `node.kubernetes.io/unschedulable:NoSchedule`: "node(s) were unschedulable".
- TaintToleration: every NoSchedule and NoExecute taint tolerated: "node(s) had untolerated
  taint {key: value}" (the node lifecycle controller's not-ready/unreachable taints keep pods off
  a node that is not Ready).
- NodeAffinity: spec.nodeSelector and the required node affinity: "node(s) didn't match Pod's
  node affinity/selector".
- NodeResourcesFit: requests (cpu, memory, extended resources such as nvidia.com/gpu; limits
  stand for requests not given) within allocatable less what the node's pods request, one pod
  slot left: "Insufficient nvidia.com/gpu", "Too many pods" (preemption could help).
- VolumeBinding: a bound claim's PersistentVolume's node affinity admits the node ("node(s) had
  volume node affinity conflict"); a claim waiting for its first consumer that is being
  provisioned for another node ("node(s) didn't find available persistent volumes to bind").
- InterPodAffinity (required terms): the pod's affinity (a pod it selects in the node's topology
  domain; the first of a group may start one), its anti-affinity, and existing pods'
  anti-affinity: "node(s) didn't match pod affinity rules", "node(s) didn't match pod
  anti-affinity rules", "node(s) didn't satisfy existing pods anti-affinity rules".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from backend.local.controllers.tainteviction import tolerates
from backend.local.registry import labels as selectors
from backend.local.registry.strategy import Obj
from backend.quantity import allocatable, quantity, requests_of

SELECTED_NODE = "volume.kubernetes.io/selected-node"
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
Verdict = tuple[list[str], bool]  # (reasons, resolvable by preemption)


@dataclass
class Snapshot:
    """What the filters read: the nodes, the pods placed (bound or assumed) on each, and the
    claims and volumes (`lookup(kind, namespace, name)`)."""

    nodes: list[Obj]
    placed: dict[str, list[Obj]] = field(default_factory=dict)
    lookup: Callable[[str, str | None, str], Obj | None] = lambda _k, _n, _name: None

    def free(self, node: Obj) -> dict[str, float]:
        left = allocatable(node)
        for pod in self.placed.get(node["metadata"]["name"], []):
            left["pods"] = left.get("pods", 0.0) - 1
            for resource, amount in requests_of(pod).items():
                left[resource] = left.get(resource, 0.0) - amount
        return left

    def domain(self, node_name: str, key: str) -> str | None:
        node = next((n for n in self.nodes if n["metadata"]["name"] == node_name), None)
        return ((node or {}).get("metadata", {}).get("labels") or {}).get(key)


def _fail(reason: str, resolvable: bool = False) -> Verdict:
    return [reason], resolvable


def node_unschedulable(pod: Obj, node: Obj, snapshot: Snapshot) -> Verdict | None:
    if (node.get("spec") or {}).get("unschedulable") and \
            not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in (pod.get("spec") or {}).get("tolerations") or []):
        return _fail("node(s) were unschedulable")
    return None


def taint_toleration(pod: Obj, node: Obj, snapshot: Snapshot) -> Verdict | None:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return _fail(f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}")
    return None


def node_affinity(pod: Obj, node: Obj, snapshot: Snapshot) -> Verdict | None:
    spec = pod.get("spec") or {}
    node_labels = node["metadata"].get("labels") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if any(node_labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()) or \
            (required and not selectors.node_selector_matches(required, node)):
        return _fail("node(s) didn't match Pod's node affinity/selector")
    return None


def resources_fit(pod: Obj, node: Obj, snapshot: Snapshot) -> Verdict | None:
    left = snapshot.free(node)
    short = ["Too many pods"] if left.get("pods", 0.0) < 1 else []
    short += [f"Insufficient {name}" for name, amount in sorted(requests_of(pod).items())
              if amount > 0 and amount > left.get(name, 0.0) + 1e-9]
    return (short, True) if short else None


def claims(pod: Obj) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in (pod.get("spec") or {}).get("volumes") or []
            if (v.get("persistentVolumeClaim") or {}).get("claimName")]


def volume_binding(pod: Obj, node: Obj, snapshot: Snapshot) -> Verdict | None:
    namespace, name = pod["metadata"]["namespace"], node["metadata"]["name"]
    for claim_name in claims(pod):
        claim = snapshot.lookup("PersistentVolumeClaim", namespace, claim_name) or {}
        volume_name = (claim.get("spec") or {}).get("volumeName")
        if volume_name and (claim.get("status") or {}).get("phase") == "Bound":
            volume = snapshot.lookup("PersistentVolume", None, volume_name) or {}
            required = (((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required"))
            if required and not selectors.node_selector_matches(required, node):
                return _fail("node(s) had volume node affinity conflict")
        elif (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE, name) != name:
            return _fail("node(s) didn't find available persistent volumes to bind")
    return None


def _term_namespaces(term: Obj, owner: Obj) -> set[str] | None:
    """The namespaces a term selects pods in (None: all)."""
    if term.get("namespaceSelector") is not None and selectors.empty(term["namespaceSelector"]):
        return None
    return set(term.get("namespaces") or []) or {owner["metadata"]["namespace"]}


def _selects(term: Obj, owner: Obj, candidate: Obj) -> bool:
    namespaces = _term_namespaces(term, owner)
    return (namespaces is None or candidate["metadata"]["namespace"] in namespaces) and \
        selectors.selects(term.get("labelSelector"), candidate["metadata"].get("labels"))


def _required(pod: Obj, kind: str) -> list[Obj]:
    return ((((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def inter_pod_affinity(pod: Obj, node: Obj, snapshot: Snapshot) -> Verdict | None:
    node_labels = node["metadata"].get("labels") or {}
    placed = [(name, p) for name, pods in snapshot.placed.items() for p in pods]

    def in_domain(key: str) -> list[Obj]:
        value = node_labels.get(key)
        return [] if value is None else [p for name, p in placed if snapshot.domain(name, key) == value]

    for term in _required(pod, "podAffinity"):
        key = term.get("topologyKey", "")
        if any(_selects(term, pod, p) for p in in_domain(key)):
            continue
        first = not any(_selects(term, pod, p) for _n, p in placed) and _selects(term, pod, pod)
        if not (first and key in node_labels):
            return _fail("node(s) didn't match pod affinity rules")
    for term in _required(pod, "podAntiAffinity"):
        if any(_selects(term, pod, p) for p in in_domain(term.get("topologyKey", ""))):
            return _fail("node(s) didn't match pod anti-affinity rules", True)
    for name, existing in placed:
        for term in _required(existing, "podAntiAffinity"):
            key = term.get("topologyKey", "")
            if key in node_labels and snapshot.domain(name, key) == node_labels[key] and _selects(term, existing, pod):
                return _fail("node(s) didn't satisfy existing pods anti-affinity rules", True)
    return None


FILTERS = (node_unschedulable, taint_toleration, node_affinity, resources_fit, volume_binding, inter_pod_affinity)


def verdict(pod: Obj, node: Obj, snapshot: Snapshot) -> Verdict | None:
    """The first filter the node fails for the pod, or None when it passes them all."""
    for check in FILTERS:
        found = check(pod, node, snapshot)
        if found is not None:
            return found
    return None


# What scoring counts for a container that requests no cpu or memory (pkg/scheduler/util
# GetNonzeroRequests: DefaultMilliCPURequest 100m, DefaultMemoryRequest 200 MiB), so pods without
# requests still spread over the nodes rather than pile onto the first.
NONZERO_DEFAULTS = {"cpu": 0.1, "memory": float(200 << 20)}


def scored_requests(pod: Obj) -> dict[str, float]:
    total: Counter[str] = Counter()
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, default in NONZERO_DEFAULTS.items():
            total[name] += quantity(asked[name]) if name in asked else default
    return dict(total)


def room(pod: Obj, node: Obj, snapshot: Snapshot) -> float:
    """NodeResourcesFit's LeastAllocated score: the share of cpu and memory left once the pod is
    placed, requests counted as scoring counts them (NONZERO_DEFAULTS)."""
    whole = allocatable(node)
    used = Counter(scored_requests(pod))
    for placed in snapshot.placed.get(node["metadata"]["name"], []):
        used.update(scored_requests(placed))
    return sum(max(0.0, whole.get(r, 0.0) - used[r]) / max(whole.get(r, 1.0), 1e-9) for r in ("cpu", "memory"))
