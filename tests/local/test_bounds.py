"""A pod cannot take the machine: a TrainJob asking for 100,000 processes per node ends Failed,
the node's cgroups bounding it (the pod's pids limit, the node's allocatable memory: limits.py),
the controller untouched. On a small node of its own (cluster up --memory, and --pod-max-pids 64
rather than the default 1024: the bound is the same code, and the processes torchrun starts before
it meets the bound each import torch, so the test's own footprint stays small too)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from backend.local.embedded import Embedded
from backend.local.node.limits import PodCgroups
from tests.local.conftest import MANIFESTS, WAIT, cli, kubectl

NODE_MEMORY = 2 << 30
POD_MAX_PIDS = 64
JOB = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "many-procs"},
       "spec": {"runtimeRef": {"name": "one-shot", "kind": "TrainingRuntime"},
                "trainer": {"numNodes": 1, "numProcPerNode": 100000, "command": ["torchrun", "-m", "training.ddp"],
                            "args": ["--steps", "5"]}}}


def _manifests(home: Path) -> Path:
    runtime = yaml.safe_load((MANIFESTS / "runtime.yaml").read_text())
    runtime["metadata"]["name"] = "one-shot"
    runtime["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"] = 0  # one failure is the end
    path = home / "bounds.yaml"
    path.write_text(yaml.safe_dump_all([runtime, JOB]))
    return path


def _node_memory_peak(controller: int, home: Path) -> int | None:
    """The most any node's pods held together, from the nodes' memory cgroups (one per node:
    kfcockpit-<state root's tag>-<node's index>, backend/local/fleet.py)."""
    tag = f"kfcockpit-{hashlib.sha1(str(Embedded(home).layout.root).encode()).hexdigest()[:12]}"  # noqa: S324
    for line in Path(f"/proc/{controller}/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        v1 = "memory" in controllers.split(",")
        if v1 or (number == "0" and not controllers):
            parent = Path("/sys/fs/cgroup/memory" if v1 else "/sys/fs/cgroup") / path.lstrip("/")
            peaks = [int(peak.read_text()) for node in parent.glob(f"{tag}-*")
                     if (peak := node / ("memory.max_usage_in_bytes" if v1 else "memory.peak")).exists()]
            if peaks:
                return max(peaks)
    return None


async def test_a_pod_asking_for_100000_processes_ends_failed_within_the_nodes_bounds(home):
    probe = PodCgroups.find("probe-bounds", NODE_MEMORY)
    probe.close()
    if probe.pids is None or probe.memory is None:
        pytest.skip(f"the node cannot bound its pods here: {probe.problem}")
    up = cli(home, "cluster", "up", "--memory", f"{NODE_MEMORY >> 30}Gi", "--pod-max-pids", str(POD_MAX_PIDS))
    assert up.returncode == 0, up.stderr
    embedded = Embedded(home)
    controller = (await embedded.status())["pid"]
    try:
        applied = kubectl(home, "apply", "-f", str(_manifests(home)))
        assert applied.returncode == 0, applied.stderr
        failed = kubectl(home, "wait", "--for=condition=Failed", "trainjob/many-procs", f"--timeout={int(WAIT)}s")
        assert failed.returncode == 0, failed.stderr
        allocatable = kubectl(home, "get", "nodes", "-o", "jsonpath={.items[0].status.allocatable.memory}")
        assert allocatable.stdout == f"{NODE_MEMORY >> 10}Ki"
        peak = _node_memory_peak(controller, home)
        assert peak is not None and peak <= NODE_MEMORY
        assert (await embedded.status())["pid"] == controller  # the cluster itself was not touched
    finally:
        await embedded.down()
