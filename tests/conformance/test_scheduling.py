"""The nodes (the lesson's cluster: two) and the scheduler: a pod is bound only where its requests
fit (kube-scheduler's NodeResourcesFit, pkg/scheduler/framework/plugins/noderesources/fit.go); the
others stay Pending with PodScheduled=False, reason Unschedulable, the reasons counted over the
nodes (FitError, pkg/scheduler/framework/types.go) and a FailedScheduling event, and no process
starts for them."""

from __future__ import annotations

import json

import yaml


def _job(name: str, nodes: int, requests: dict) -> str:
    return yaml.safe_dump({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"},
                 "trainer": {"numNodes": nodes, "command": ["python3", "-c", "import time; time.sleep(600)"],
                             "resourcesPerNode": {"requests": requests}}}})


def test_pods_that_do_not_fit_stay_pending_and_start_nothing(kubectl, embedded):
    nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    assert len(nodes) == 2
    allocatable = nodes[0]["status"]["allocatable"]
    name, selector = "sc-full", "jobset.sigs.k8s.io/jobset-name=sc-full"
    kubectl("apply", "-f", "-", input=_job(name, 3, {"cpu": allocatable["cpu"]}))  # each pod wants a node
    try:
        _pods_scheduled(kubectl, selector, len(nodes))
        _seen_pending_and_nothing_started(kubectl, embedded, name, selector, nodes)
    finally:  # pods holding a node's CPUs would leave the next tests' pods unschedulable
        kubectl("delete", "trainjob", name, "--ignore-not-found")


def _pods_scheduled(kubectl, selector: str, count: int) -> None:
    """Wait for `count` of the selected pods to be bound and Running. kubectl wait refuses a
    selector that matches nothing yet ("no matching resources found": the controllers may not
    have made the pods when it starts), so their binding is watched first."""
    watch = kubectl.popen("get", "pods", "-l", selector, "--field-selector", "spec.nodeName!=",
                          "--watch", "-o", "name")
    try:
        bound: set[str] = set()
        for line in watch.stdout:
            bound.add(line.strip())
            if len(bound) >= count:
                break
    finally:
        watch.kill()
        watch.communicate()
    assert len(bound) >= count, f"only {sorted(bound)} bound"
    kubectl("wait", "--for=jsonpath={.status.phase}=Running", *sorted(bound), "--timeout=300s")


def _seen_pending_and_nothing_started(kubectl, embedded, name: str, selector: str, nodes: list) -> None:
    pods = json.loads(kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]
    placed = sorted(p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName"))
    assert placed == sorted(n["metadata"]["name"] for n in nodes)  # one on each node
    (pod,) = [p for p in pods if not p["spec"].get("nodeName")]
    assert pod["status"]["phase"] == "Pending"
    (scheduled,) = pod["status"]["conditions"]
    assert (scheduled["type"], scheduled["status"], scheduled["reason"]) == ("PodScheduled", "False",
                                                                             "Unschedulable")
    assert scheduled["message"] == ("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are "
                                    "available: 2 No preemption victims found for incoming pod.")
    assert not (embedded[0] / "cluster" / "logs" / name / f"{pod['metadata']['name']}.log").exists()
    events = json.loads(kubectl("get", "events", "--field-selector", "reason=FailedScheduling", "-o", "json"))
    assert any(e["involvedObject"]["name"].startswith(name) for e in events["items"])
    assert "Pending" in kubectl("get", "pods", "-l", selector)


def test_more_nodes_than_the_node_has_pod_slots_is_refused(kubectl):
    err = kubectl.fails("apply", "-f", "-", input=_job("sc-huge", 100000, {}))
    assert "spec.trainer.numNodes: Invalid value: 100000" in err and "hold 220 pods together" in err
    assert kubectl("get", "trainjobs", "-o", "name").count("sc-huge") == 0
