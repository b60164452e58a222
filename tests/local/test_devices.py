"""A node's GPUs as the NVIDIA device plugin and GPU feature discovery present them
(backend/local/node/devices.py): `--gpus-per-node auto` shares a machine's real devices out among
the nodes, a count the machine cannot give is simulated; whole devices per pod, never two pods on
one, the IDs in NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES; a pod given none on a machine
with GPUs sees none."""

from __future__ import annotations

import pytest

from backend.errors import InvalidResource
from backend.local.node.devices import Devices, Gpu, labels, plan

NODES = ["kfcockpit-worker", "kfcockpit-worker2"]
H200 = [Gpu(f"GPU-{i}", "NVIDIA-H200") for i in range(3)]


def test_auto_shares_the_machines_gpus_out_and_a_count_it_lacks_is_simulated():
    shared = plan("auto", NODES, H200)
    assert [[g.id for g in shared[n]] for n in NODES] == [["GPU-0", "GPU-1"], ["GPU-2"]]
    assert labels(shared["kfcockpit-worker2"]) == {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "1"}
    assert plan("auto", NODES, []) == {n: [] for n in NODES}
    real = plan(1, NODES, H200)
    assert [g.id for n in NODES for g in real[n]] == ["GPU-0", "GPU-1"] and not any(g.simulated for g in real[NODES[0]])
    simulated = plan(2, NODES, H200)  # 4 asked, 3 here: every node's are simulated
    assert all(g.simulated for n in NODES for g in simulated[n])
    assert len({g.id for n in NODES for g in simulated[n]}) == 4
    assert simulated == plan(2, NODES, H200)  # the same IDs at every start
    assert labels(simulated[NODES[0]])["kfcockpit.io/gpu-simulated"] == "true"


def test_whole_devices_per_pod_released_when_it_ends():
    devices = Devices(H200[:2], machine_has_gpus=True)
    assert devices.env("a", 1) == {"NVIDIA_VISIBLE_DEVICES": "GPU-0", "CUDA_VISIBLE_DEVICES": "GPU-0"}
    assert devices.env("a", 1) == devices.env("a", 1)  # asked again: the same device
    assert devices.env("b", 1)["CUDA_VISIBLE_DEVICES"] == "GPU-1"
    assert devices.env("c", 0) == {"CUDA_VISIBLE_DEVICES": ""}  # none asked: none seen
    with pytest.raises(InvalidResource, match="Requested: 1, Available: 0"):
        devices.allocate("c", 1)
    assert devices.release("a") and not devices.release("a")
    assert devices.env("c", 1)["NVIDIA_VISIBLE_DEVICES"] == "GPU-0"


def test_torchruns_auto_counts_simulated_devices_as_it_counts_real_ones():
    """Trainer's torch plugin leaves PET_NPROC_PER_NODE=auto on a GPU node, and torchrun's auto is
    the number of GPUs the pod sees (torch/distributed/run.py, determine_local_world_size), which
    CUDA would count as none for simulated IDs: the kubelet counts them instead. A number is the
    user's; real devices are torch's to count."""
    simulated = Devices(plan(2, NODES, [])[NODES[0]], machine_has_gpus=False)
    env = simulated.env("a", 2, {"PET_NPROC_PER_NODE": "auto"})
    assert env["PET_NPROC_PER_NODE"] == "2" and len(env["KFCOCKPIT_SIMULATED_GPUS"].split(",")) == 2
    assert simulated.env("b", 0, {"PET_NPROC_PER_NODE": "auto"}) == {}  # none given: nothing to count
    assert "PET_NPROC_PER_NODE" not in Devices(plan(1, NODES, [])[NODES[0]], False).env("c", 1, {
        "PET_NPROC_PER_NODE": "3"})
    assert "PET_NPROC_PER_NODE" not in Devices(H200[:2], True).env("d", 2, {"PET_NPROC_PER_NODE": "auto"})
