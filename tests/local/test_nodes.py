"""Several nodes with GPUs on the embedded cluster, seen with the real kubectl: `cluster up --nodes
3 --gpus-per-node 2` gives three Ready nodes with upstream's labels and `nvidia.com/gpu: 2`
allocatable; pods asking for GPUs (requests equal limits) are placed per node by NodeResourcesFit
and given their devices' IDs as the NVIDIA device plugin gives them; one that fits nowhere stays
Pending with kube-scheduler's FitError message (pkg/scheduler/schedule_one.go: "0/3 nodes are
available: 3 Insufficient nvidia.com/gpu.")."""

from __future__ import annotations

import json

import pytest

from backend.local.node.devices import machine_gpus
from tests.local.conftest import cli, kubectl


def _gpu_pod(name: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "c", "image": "busybox",
                "command": ["sh", "-c", 'echo "$NVIDIA_VISIBLE_DEVICES $CUDA_VISIBLE_DEVICES"; exec sleep 600'],
                "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "100m"}}}]}}


@pytest.fixture
def gpu_nodes(home, tmp_path):
    up = cli(home, "cluster", "up", "--nodes", "3", "--gpus-per-node", "2")
    assert up.returncode == 0, up.stderr
    yield home
    cli(home, "cluster", "down")


def test_three_gpu_nodes_place_gpu_pods_apart_with_their_devices_and_a_fourth_waits(gpu_nodes, tmp_path):
    home = gpu_nodes
    nodes = json.loads(kubectl(home, "get", "nodes", "-o", "json").stdout)["items"]
    assert [n["metadata"]["name"] for n in nodes] == ["kfcockpit-worker", "kfcockpit-worker2", "kfcockpit-worker3"]
    for found in nodes:
        labels, status = found["metadata"]["labels"], found["status"]
        assert labels["kubernetes.io/hostname"] == found["metadata"]["name"]
        assert "topology.kubernetes.io/zone" in labels and labels["nvidia.com/gpu.count"] == "2"
        assert "nvidia.com/gpu.product" in labels
        assert status["capacity"]["nvidia.com/gpu"] == status["allocatable"]["nvidia.com/gpu"] == "2"
        assert {"cpu", "memory", "pods"} <= set(status["allocatable"])
        assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"

    status = cli(home, "cluster", "status", "-o", "json")
    nodes_check = next(c for c in json.loads(status.stdout) if c["name"] == "nodes")
    assert nodes_check["detail"].startswith("3 nodes: kfcockpit-worker, kfcockpit-worker2, kfcockpit-worker3")
    if len(machine_gpus()) < 6:  # fewer GPUs than asked for: the cockpit says they are simulated
        assert nodes_check["detail"].endswith("; nvidia.com/gpu simulated (no such GPUs here): GPU pods train on CPU")

    manifest = tmp_path / "pods.json"
    manifest.write_text("\n---\n".join(json.dumps(_gpu_pod(f"gpu-{i}", 2)) for i in range(3)))
    assert kubectl(home, "apply", "-f", str(manifest)).returncode == 0
    ready = kubectl(home, "wait", "pod/gpu-0", "pod/gpu-1", "pod/gpu-2", "--for=condition=Ready", "--timeout=120s")
    assert ready.returncode == 0, ready.stderr
    pods = json.loads(kubectl(home, "get", "pods", "-o", "json").stdout)["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == [n["metadata"]["name"] for n in nodes]  # one each
    seen = set()
    for i in range(3):
        shown = kubectl(home, "logs", f"gpu-{i}").stdout.split()
        nvidia, cuda = shown
        ids = nvidia.split(",")
        assert nvidia == cuda and len(ids) == 2 and all(d.startswith("GPU-") for d in ids)
        seen |= set(ids)
    assert len(seen) == 6  # every device given once

    manifest.write_text(json.dumps(_gpu_pod("gpu-more", 1)))
    assert kubectl(home, "apply", "-f", str(manifest)).returncode == 0
    waiting = kubectl(home, "wait", "pod/gpu-more", "--for=jsonpath={.status.conditions[0].reason}=Unschedulable",
                      "--timeout=60s")
    assert waiting.returncode == 0, waiting.stderr
    message = kubectl(home, "get", "pod/gpu-more", "-o", "jsonpath={.status.conditions[0].message}").stdout
    assert message.startswith("0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: "), message

    described = kubectl(home, "describe", "node", "kfcockpit-worker2").stdout
    allocated = described[described.index("Allocated resources:"):]
    assert "nvidia.com/gpu     2" in allocated, allocated

    deleted = kubectl(home, "delete", "pod", "gpu-1", "--wait=true")  # its devices back: the waiting pod fits
    assert deleted.returncode == 0, deleted.stderr
    placed = kubectl(home, "wait", "pod/gpu-more", "--for=condition=Ready", "--timeout=120s")
    assert placed.returncode == 0, placed.stderr


def test_a_node_the_next_start_has_no_machine_for_goes_with_its_pods(home, tmp_path):
    """`cluster up --nodes 3`, a pod on the third node, then `--nodes 2`: the third node is not
    registered again and its pod goes (the pod GC's gcOrphaned: Failed, DisruptionTarget
    DeletionByPodGC)."""
    try:
        assert cli(home, "cluster", "up", "--nodes", "3").returncode == 0
        manifest = tmp_path / "pod.json"
        pod = _gpu_pod("on-third", 0)
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "kfcockpit-worker3"}
        pod["spec"]["containers"][0]["resources"] = {}
        manifest.write_text(json.dumps(pod))
        assert kubectl(home, "apply", "-f", str(manifest)).returncode == 0
        assert kubectl(home, "wait", "pod/on-third", "--for=condition=Ready", "--timeout=60s").returncode == 0
        assert cli(home, "cluster", "down").returncode == 0
        assert cli(home, "cluster", "up", "--nodes", "2").returncode == 0
        names = kubectl(home, "get", "nodes", "-o", "name").stdout.split()
        assert names == ["node/kfcockpit-worker", "node/kfcockpit-worker2"]
        gone = kubectl(home, "wait", "pod/on-third", "--for=delete", "--timeout=60s")
        assert gone.returncode == 0, gone.stderr
    finally:
        cli(home, "cluster", "down")
