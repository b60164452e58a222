"""JobSet's pod webhooks (kubernetes-sigs/jobset v0.12.0 pkg/webhooks/pod_webhook.go): exclusive
placement per topology, `alpha.jobset.sigs.k8s.io/exclusive-topology: <node label>` on a JobSet
or a replicated job, which the JobSet controller copies onto its Jobs' pods.

- default (mutating, on create): a JobSet pod records its priority in a label; with exclusive
  placement, the leader pod (completion index 0) gets a required pod affinity to its own Job's
  pods (job-key In [its key]) and a required anti-affinity to other Jobs' pods of its priority
  (job-key Exists, NotIn [its key]), both over the topology label, so one Job takes a domain and
  no other Job shares it; a follower gets a nodeSelector for its leader's domain, read from the
  leader's node.
- validate (on create): a follower is refused until its leader exists and is scheduled ("an
  expected, transient error": its Job controller tries again).

With the node-selector strategy (`alpha.jobset.sigs.k8s.io/node-selector`) the nodes are labelled
by hand and neither applies.
"""

from __future__ import annotations

from typing import Any

from backend.local.registry.status import denied

Obj = dict[str, Any]

EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
PRIORITY = "jobset.sigs.k8s.io/priority"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _exclusive(pod: Obj) -> str | None:
    annotations = pod["metadata"].get("annotations") or {}
    if JOBSET_NAME not in annotations or NODE_SELECTOR_STRATEGY in annotations:
        return None
    return annotations.get(EXCLUSIVE)


def _leader(pod: Obj) -> bool:
    return (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX) == "0"


def default_pod(pod: Obj, reader) -> None:
    """The mutating webhook (Default)."""
    meta, spec = pod["metadata"], pod.setdefault("spec", {})
    if JOBSET_NAME not in (meta.get("annotations") or {}):
        return
    if NODE_SELECTOR_STRATEGY in (meta.get("annotations") or {}):
        return
    if spec.get("priority") is not None:
        meta.setdefault("labels", {})[PRIORITY] = str(spec["priority"])
    topology = _exclusive(pod)
    if topology is None:
        return
    labels = meta.get("labels") or {}
    if _leader(pod):
        affinity = spec.setdefault("affinity", {})
        key = labels.get(JOB_KEY, "")
        affinity.setdefault("podAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(
            {"labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [key]}]},
             "topologyKey": topology, "namespaceSelector": {}})
        affinity.setdefault("podAntiAffinity", {}).setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", []).append(
            {"labelSelector": {"matchExpressions": [
                {"key": JOB_KEY, "operator": "Exists"},
                {"key": JOB_KEY, "operator": "NotIn", "values": [key]},
                {"key": PRIORITY, "operator": "In", "values": [labels.get(PRIORITY, "")]}]},
             "topologyKey": topology, "namespaceSelector": {}})
        return
    leader = _leader_of(pod, reader)
    if leader is None or not (leader.get("spec") or {}).get("nodeName"):
        return  # the validating webhook refuses it
    node = reader.find("Node", None, leader["spec"]["nodeName"]) or {"metadata": {}}
    domain = (node["metadata"].get("labels") or {}).get(topology)
    if domain is not None:
        spec.setdefault("nodeSelector", {})[topology] = domain


def validate_pod(pod: Obj, reader) -> None:
    """The validating webhook (ValidateCreate): raises 403 for a follower that must wait."""
    topology = _exclusive(pod)
    if topology is None or _leader(pod):
        return
    if topology not in ((pod.get("spec") or {}).get("nodeSelector") or {}):
        raise denied("vpod.kb.io", "pods", pod["metadata"]["name"], "follower pod node selector for topology domain "
                     f"not found. missing selector: {topology}")
    leader = _leader_of(pod, reader)
    if leader is None or not (leader.get("spec") or {}).get("nodeName"):
        raise denied("vpod.kb.io", "pods", pod["metadata"]["name"], "leader pod not yet scheduled, not creating "
                     "follower pod. this is an expected, transient error")


def _leader_of(pod: Obj, reader) -> Obj | None:
    """The live leader pod of the follower's Job (same owner), or None."""
    labels, meta = pod["metadata"].get("labels") or {}, pod["metadata"]
    name = f"{labels.get(JOBSET_NAME)}-{labels.get(REPLICATED_JOB)}-{labels.get(JOB_INDEX)}-0"
    owner = next((r.get("uid") for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    found = [p for p in reader.list("Pod", meta.get("namespace"))
             if p["metadata"]["name"].rsplit("-", 1)[0] == name and not p["metadata"].get("deletionTimestamp")
             and any(r.get("uid") == owner and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])]
    return found[0] if len(found) == 1 else None
