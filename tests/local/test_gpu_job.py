"""The GPU variant of the lesson's TrainJob (manifests/trainjob-gpu.yaml, unchanged) on an embedded
cluster of two nodes with one simulated GPU each: its workers are placed one per node by their
nvidia.com/gpu request, given the simulated device's ID, train `--device cuda` on the CPU and say
so (this machine has no GPU), and the job completes."""

from __future__ import annotations

import json

import pytest

from backend.local.node.devices import machine_gpus
from backend.project import MANIFESTS
from tests.local.conftest import cli, kubectl


@pytest.fixture
def two_gpu_nodes(home):
    up = cli(home, "cluster", "up", "--nodes", "2", "--gpus-per-node", "1")
    assert up.returncode == 0, up.stderr
    yield home
    cli(home, "cluster", "down")


@pytest.mark.skipif(bool(machine_gpus()), reason="this machine has GPUs: they are real, not simulated")
def test_the_gpu_trainjob_runs_one_worker_per_gpu_node_on_the_cpu_and_says_so(two_gpu_nodes):
    home = two_gpu_nodes
    applied = kubectl(home, "apply", "-f", str(MANIFESTS / "runtime.yaml"), "-f", str(MANIFESTS / "volume.yaml"),
                      "-f", str(MANIFESTS / "trainjob-gpu.yaml"))
    assert applied.returncode == 0, applied.stderr
    done = kubectl(home, "wait", "trainjob/lesson-ddp-gpu", "--for=condition=Complete", "--timeout=400s", timeout=420)
    assert done.returncode == 0, done.stderr + kubectl(home, "get", "pods", "-o", "wide").stdout
    pods = json.loads(kubectl(home, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=lesson-ddp-gpu",
                              "-o", "json").stdout)["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["kfcockpit-worker", "kfcockpit-worker2"]
    log = kubectl(home, "logs", pods[0]["metadata"]["name"]).stdout
    assert "--device cuda on simulated GPU(s) GPU-" in log and "training on the CPU" in log, log[-2000:]
