"""A node's GPUs, as the NVIDIA device plugin and GPU feature discovery present them: the extended
resource `nvidia.com/gpu` (capacity and allocatable: the node's devices), the labels GFD sets
(`nvidia.com/gpu.product`, `nvidia.com/gpu.count`), and, for a container that was allocated some,
the devices' IDs in `NVIDIA_VISIBLE_DEVICES` (the plugin's envvar strategy, UUIDs).

Where the devices come from (`plan`, at the composition root):
- `--gpus-per-node auto`: this machine's GPUs shared out among the nodes (a workstation's four
  GPUs on two nodes: two each), none where it has none;
- `--gpus-per-node G`: real devices when the machine has G for every node, else G simulated
  ones per node: IDs that name no device, so CUDA sees none and the pods train on CPU (`--device
  auto`, or `cuda` with the simulated IDs in KFCOCKPIT_SIMULATED_GPUS: the training core says it
  trains on the CPU instead), which the node says with `kfcockpit.io/gpu-simulated: "true"`.

A pod process here is not in a container whose runtime hides the other devices, so the kubelet
also sets `CUDA_VISIBLE_DEVICES` to the same IDs (CUDA takes UUIDs): a pod sees exactly what it
was given, and a pod given none sees none on a machine that has some.

Simulated devices name nothing CUDA can open, so where a workload counts its GPUs through torch it
would count none. The one such count a pod's spec asks of its node is torchrun's
`--nproc-per-node auto` (or `gpu`), which Kubeflow Trainer's torch plugin sets as
`PET_NPROC_PER_NODE=auto` on a GPU node: on a real node it is the number of devices the pod sees
(torch/distributed/run.py, determine_local_world_size: torch.accelerator.device_count()), else
the CPU count. For a pod given simulated devices the kubelet resolves it to that number, so the
pod starts one process per GPU as on a GPU node (each process's LOCAL_RANK then names its device
among the IDs, as CUDA's device index would); real devices are left to torch. Allocation is the kubelet's
device manager's: whole devices, first free first, released when the pod's containers end; a
pod asking more than are free fails admission (UnexpectedAdmissionError), as upstream.
"""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from backend.errors import InvalidResource

RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL, COUNT_LABEL = "nvidia.com/gpu.product", "nvidia.com/gpu.count"
SIMULATED_LABEL = "kfcockpit.io/gpu-simulated"
SIMULATED_PRODUCT = "Simulated-GPU"
SIMULATED_ENV = "KFCOCKPIT_SIMULATED_GPUS"  # training/device.py reads it
NPROC_ENV = "PET_NPROC_PER_NODE"  # torchrun's --nproc-per-node, as Kubeflow Trainer sets it
_PER_DEVICE = ("auto", "gpu")  # the values torchrun resolves by counting the GPUs it sees
_NAMESPACE = uuid.UUID("6b1c8a52-25f4-4a53-9a1e-6f0e8d1d5b3a")


@dataclass(frozen=True)
class Gpu:
    id: str  # what NVIDIA_VISIBLE_DEVICES names: "GPU-<uuid>"
    product: str  # as GFD labels it: spaces become dashes ("NVIDIA-H200")
    simulated: bool = False


def machine_gpus() -> list[Gpu]:
    """This machine's NVIDIA GPUs (the driver's /proc files, else nvidia-smi), in index order."""
    found = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        fields = {}
        try:
            for line in info.read_text().splitlines():
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
        except OSError:
            continue
        if fields.get("GPU UUID"):
            found.append(Gpu(fields["GPU UUID"], _product(fields.get("Model", "NVIDIA GPU"))))
    if found:
        return found
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=uuid,name", "--format=csv,noheader"], capture_output=True,
                                text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [Gpu(uid.strip(), _product(name)) for uid, _, name in (line.partition(",") for line in listed.splitlines())
            if uid.strip().startswith("GPU-")]


def _product(name: str) -> str:
    return "-".join(name.strip().split())


def plan(per_node: int | str, nodes: list[str], found: list[Gpu]) -> dict[str, list[Gpu]]:
    """Each node's GPUs (see the module's doc)."""
    if per_node == "auto":
        share, extra = divmod(len(found), len(nodes))
        given, start = {}, 0
        for i, node in enumerate(nodes):
            count = share + (1 if i < extra else 0)
            given[node] = found[start:start + count]
            start += count
        return given
    count = int(per_node)
    if count and len(found) >= count * len(nodes):
        return {node: found[i * count:(i + 1) * count] for i, node in enumerate(nodes)}
    return {node: [Gpu(f"GPU-{uuid.uuid5(_NAMESPACE, f'{node}/{i}')}", SIMULATED_PRODUCT, simulated=True)
                   for i in range(count)] for node in nodes}


def labels(gpus: list[Gpu]) -> dict[str, str]:
    """The node labels GPU feature discovery sets (none on a node without GPUs)."""
    if not gpus:
        return {}
    found = {PRODUCT_LABEL: gpus[0].product, COUNT_LABEL: str(len(gpus))}
    if any(g.simulated for g in gpus):
        found[SIMULATED_LABEL] = "true"
    return found


class Devices:
    """One node's device manager for nvidia.com/gpu."""

    def __init__(self, gpus: list[Gpu], machine_has_gpus: bool):
        self.gpus = list(gpus)
        self.hide_others = machine_has_gpus  # a pod given none must not see the machine's
        self.given: dict[str, list[Gpu]] = {}  # by pod uid

    def allocate(self, uid: str, count: int) -> list[Gpu]:
        """Whole devices for the pod (the same ones again when asked again); InvalidResource in
        upstream's words when fewer are free (the container waits for some to be released)."""
        if uid in self.given:
            return self.given[uid]
        busy = {g.id for taken in self.given.values() for g in taken}
        free = [g for g in self.gpus if g.id not in busy]
        if count > len(free):
            raise InvalidResource(f"Allocate failed due to requested number of devices unavailable for {RESOURCE}. "
                               f"Requested: {count}, Available: {len(free)}, which is unexpected")
        self.given[uid] = free[:count]
        return self.given[uid]

    def adopt(self, uid: str, ids: list[str]) -> None:
        """The devices a run the node's previous kubelet started holds (its shim recorded them)."""
        self.given[uid] = [g for g in self.gpus if g.id in ids]

    def release(self, uid: str) -> bool:
        """The pod's devices are free again; whether it had any."""
        return bool(self.given.pop(uid, None))

    def env(self, uid: str, count: int, container_env: dict[str, str] | None = None) -> dict[str, str]:
        """The environment a container of the pod (whose own is `container_env`) gets for its
        devices."""
        if count <= 0:
            return {"CUDA_VISIBLE_DEVICES": ""} if self.hide_others else {}
        given = self.allocate(uid, count)
        ids = ",".join(g.id for g in given)
        env = {"NVIDIA_VISIBLE_DEVICES": ids, "CUDA_VISIBLE_DEVICES": ids}
        if any(g.simulated for g in given):  # the training core then runs `--device cuda` on the CPU, and says so
            env[SIMULATED_ENV] = ids
            if (container_env or {}).get(NPROC_ENV) in _PER_DEVICE:  # what torchrun counts on a GPU node
                env[NPROC_ENV] = str(len(given))
        return env
