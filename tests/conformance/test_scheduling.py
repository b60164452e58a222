"""The one node and its scheduler: a pod is bound only where its requests fit (as the default
scheduler's NodeResourcesFit); the others stay Pending with PodScheduled=False, reason
Unschedulable and a FailedScheduling event, and no process starts for them."""

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
    allocatable = json.loads(kubectl("get", "nodes", "-o", "jsonpath={.items[0].status.allocatable}"))
    name, selector = "sc-full", "jobset.sigs.k8s.io/jobset-name=sc-full"
    kubectl("apply", "-f", "-", input=_job(name, 3, {"cpu": allocatable["cpu"]}))  # each pod wants the node
    kubectl("wait", "--for=jsonpath={.status.phase}=Running", "pod", "-l",
            f"{selector},batch.kubernetes.io/job-completion-index=0", "--timeout=300s")
    for index in (1, 2):
        pod = kubectl("get", "pods", "-l", f"{selector},batch.kubernetes.io/job-completion-index={index}",
                      "-o", "jsonpath={.items[0]}")
        pod = json.loads(pod)
        assert pod["status"]["phase"] == "Pending" and "nodeName" not in pod["spec"]
        (scheduled,) = pod["status"]["conditions"]
        assert (scheduled["type"], scheduled["status"], scheduled["reason"]) == ("PodScheduled", "False",
                                                                                 "Unschedulable")
        assert "1 Insufficient cpu" in scheduled["message"]
        assert not (embedded[0] / "cluster" / "logs" / name / f"{pod['metadata']['name']}.log").exists()
    events = json.loads(kubectl("get", "events", "--field-selector", "reason=FailedScheduling", "-o", "json"))
    assert any(e["involvedObject"]["name"].startswith(name) for e in events["items"])
    assert "Pending" in kubectl("get", "pods", "-l", selector)
    kubectl("delete", "trainjob", name)


def test_more_nodes_than_the_node_has_pod_slots_is_refused(kubectl):
    err = kubectl.fails("apply", "-f", "-", input=_job("sc-huge", 100000, {}))
    assert "spec.trainer.numNodes: Invalid value: 100000" in err and "hold 110 pods together" in err
    assert kubectl("get", "trainjobs", "-o", "name").count("sc-huge") == 0
