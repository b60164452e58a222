"""The scheduler's filters and score over nodes (backend/local/controllers/placement.py), as
kube-scheduler's default profile (kubernetes pkg/scheduler/framework/plugins): NodeUnschedulable,
TaintToleration, NodeAffinity (nodeSelector), NodeResourcesFit with extended resources, and
LeastAllocated scoring with GetNonzeroRequests' defaults (pkg/scheduler/util/pod_resources.go)."""

from __future__ import annotations

import pytest

from backend.local.controllers.placement import Snapshot, room, verdict
from backend.local.registry.strategies.pods import resource_requirements


def node(name: str, gpus: int = 2, cpu: str = "2", unschedulable: bool = False, taints=None, labels=None) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {**({"unschedulable": True} if unschedulable else {}), **({"taints": taints} if taints else {})},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}}}


def pod(name: str = "p", gpus: int = 0, cpu: str | None = None, tolerations=None, selector=None) -> dict:
    limits = {**({"nvidia.com/gpu": str(gpus)} if gpus else {}), **({"cpu": cpu} if cpu else {})}
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}],
                     **({"tolerations": tolerations} if tolerations else {}),
                     **({"nodeSelector": selector} if selector else {})}}


def test_extended_resources_fit_per_node_and_count_what_is_placed():
    a, b = node("a"), node("b")
    snapshot = Snapshot([a, b], {"a": [pod("x", gpus=2)]})
    assert verdict(pod(gpus=1), a, snapshot) == (["Insufficient nvidia.com/gpu"], True)
    assert verdict(pod(gpus=1), b, snapshot) is None
    assert verdict(pod(gpus=3), b, snapshot) == (["Insufficient nvidia.com/gpu"], True)


def test_cordon_taints_and_selectors_keep_a_pod_off_a_node_in_upstreams_words():
    unreachable = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    snapshot = Snapshot([])
    assert verdict(pod(), node("a", unschedulable=True), snapshot) == (["node(s) were unschedulable"], False)
    assert verdict(pod(), node("a", taints=unreachable), snapshot) == \
        (["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"], False)
    tolerant = pod(tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}])
    assert verdict(tolerant, node("a", taints=unreachable), snapshot) is None
    assert verdict(pod(selector={"nvidia.com/gpu.product": "H200"}), node("a"), snapshot) == \
        (["node(s) didn't match Pod's node affinity/selector"], False)
    h200 = node("a", labels={"nvidia.com/gpu.product": "H200"})
    assert verdict(pod(selector={"nvidia.com/gpu.product": "H200"}), h200, snapshot) is None


def test_pods_without_requests_spread_as_least_allocated_scores_them():
    """GetNonzeroRequests: 100m cpu and 200Mi memory for a container that asks none, so the second
    such pod scores the empty node higher."""
    a, b = node("a"), node("b")
    snapshot = Snapshot([a, b], {"a": [pod("x")]})
    assert room(pod(), b, snapshot) > room(pod(), a, snapshot)


@pytest.mark.parametrize("resources, problem", [
    ({"requests": {"nvidia.com/gpu": "1"}}, "Limit must be set for non overcommitable resources"),
    ({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}, "must be equal to nvidia.com/gpu limit"),
    ({"limits": {"nvidia.com/gpu": "500m"}}, "must be an integer"),
    ({"requests": {"cpu": "-50"}}, 'Invalid value: "-50": must be greater than or equal to 0'),
    ({"limits": {"memory": "-1Gi"}}, 'Invalid value: "-1Gi": must be greater than or equal to 0'),
    ({"requests": {"cpu": "3"}, "limits": {"cpu": "2"}}, 'Invalid value: "3": must be less than or equal to cpu '
                                                         "limit of 2"),
])
def test_an_extended_resource_is_never_overcommitted(resources, problem):
    """ValidateResourceRequirements (pkg/apis/core/validation/validation.go): an extended resource's
    request equals its limit and is whole; every quantity is nonnegative (ValidateNonnegativeQuantity,
    IsNegativeErrorMsg); a request is at most its limit."""
    (found,) = resource_requirements({"containers": [{"name": "c", "resources": resources}]})
    assert problem in found[1]
