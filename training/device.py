"""Where a worker computes: one decision per process, made before anything is built, that the rest
of training only reads. Everything after it (model, optimizer state, batches, DDP, checkpoints)
runs the same code on a GPU and on a CPU; this module is the only place that tells them apart.

`--device auto|cpu|cuda` (auto: CUDA when torch sees a GPU) and `--backend auto|nccl|gloo`
(auto: NCCL on CUDA, gloo on CPU), with torchrun's LOCAL_RANK, become a `Placement`: the device
(`cuda:<LOCAL_RANK>` on CUDA), the process group's backend and the DDP wrapper's device_ids.
NCCL takes one GPU per rank, so a LOCAL_RANK beyond the GPUs visible is refused; gloo carries CUDA
tensors too and lets ranks share GPUs (`--backend gloo`: rank i on GPU i mod count), which is how
two ranks train on a machine with one GPU. Under Ray Train the device is the one Ray assigns
(a `Placement` of ray.train.torch.get_device()), and `ray_scaling` turns --device into Ray's ask.
On an embedded cluster's simulated GPUs (no device CUDA can open) `cuda` and `auto` train on the
CPU over gloo, each rank keeping the device id its LOCAL_RANK was given (`Placement.gpu`).

`decide` reads what torch.cuda reports through `Cuda`, so tests decide for machines they are not
on. `apply` makes the settings a run is reproducible under: deterministic algorithms and the cuBLAS
workspace that needs (on CUDA), so a run killed and resumed ends bitwise equal to one that was not,
on the same hardware and world size. No torch import at module level: the options import this.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "nccl", "gloo")
PRECISIONS = ("fp32", "bf16")
# cuBLAS is deterministic only with a fixed workspace (CUDA's documented ":4096:8"); it is read
# when cuBLAS starts, so it is set before any CUDA work. Harmless without CUDA.
CUBLAS_WORKSPACE = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


class DeviceError(ValueError):
    """A device or backend this machine cannot give; the message is one line naming what was seen."""


# The GPUs an embedded cluster's node simulates for this pod (backend/local/node/devices.py): IDs
# that name no device, on a machine without them.
SIMULATED_ENV = "KFCOCKPIT_SIMULATED_GPUS"


@dataclass(frozen=True)
class Cuda:
    """What torch.cuda reports on this machine, and the simulated GPUs a pod was given."""

    available: bool
    count: int
    simulated: str = ""

    @classmethod
    def here(cls) -> Cuda:
        import os

        import torch

        available = torch.cuda.is_available()
        return cls(available, torch.cuda.device_count() if available else 0, os.environ.get(SIMULATED_ENV, ""))


@dataclass(frozen=True)
class Placement:
    device: str  # "cpu" or "cuda:N", as torch.device spells it
    backend: str  # the process group's: "gloo" or "nccl"
    note: str = ""  # what the run should say about its device (a simulated GPU)
    simulated_gpu: int | None = None  # the simulated device this rank was given; it computes on the CPU

    @property
    def device_type(self) -> str:
        return self.device.split(":")[0]

    @property
    def index(self) -> int | None:
        return int(self.device.split(":")[1]) if ":" in self.device else None

    @property
    def gpu(self) -> int | None:
        """The device id this rank was given among those its pod sees (CUDA's index, or a simulated
        device's position in KFCOCKPIT_SIMULATED_GPUS); None on a CPU run."""
        return self.index if self.index is not None else self.simulated_gpu

    def ddp_device_ids(self) -> list[int] | None:
        """DistributedDataParallel's device_ids: the one GPU of this rank, None on CPU."""
        return None if self.index is None else [self.index]


def local_rank(environ: Mapping[str, str] = os.environ) -> int:
    """This process's rank on its node: torchrun's LOCAL_RANK, 0 for a plain process."""
    value = environ.get("LOCAL_RANK", "0")
    if not value.isdigit():
        raise DeviceError(f"LOCAL_RANK must be a number of 0 or more, got {value!r}")
    return int(value)


def decide(device: str, backend: str, rank_on_node: int, cuda: Cuda) -> Placement:
    """The device and backend of the process with LOCAL_RANK `rank_on_node`, or DeviceError."""
    if device not in DEVICES:
        raise DeviceError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    if backend not in BACKENDS:
        raise DeviceError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if cuda.simulated and not (cuda.available and cuda.count > 0) and (
            device == "cuda" or (device == "auto" and backend != "nccl")):
        # The rank's device as on a GPU node (cuda:LOCAL_RANK), shared round-robin as gloo's would be.
        given = cuda.simulated.split(",")
        return Placement("cpu", "gloo", f"--device {device} on simulated GPU(s) {cuda.simulated}: training on the "
                                        "CPU with gloo (the embedded cluster's node has no real GPU)",
                         simulated_gpu=rank_on_node % len(given))
    if device == "cuda" and not (cuda.available and cuda.count > 0):
        raise DeviceError("--device cuda, but torch sees no CUDA GPU here (torch.cuda.is_available() "
                          "is False); use --device cpu or auto")
    on_cuda = device == "cuda" or (device == "auto" and cuda.available and cuda.count > 0)
    if not on_cuda:
        if backend == "nccl":
            raise DeviceError("--backend nccl needs CUDA tensors, but this run is on the CPU; use gloo or auto")
        return Placement("cpu", "gloo")
    backend = "nccl" if backend == "auto" else backend
    if rank_on_node >= cuda.count:
        if backend == "nccl":
            raise DeviceError(f"LOCAL_RANK {rank_on_node}, but {cuda.count} GPU(s) are visible and NCCL "
                              f"takes one per rank: start at most {cuda.count} process(es) per node, "
                              "or share GPUs with --backend gloo")
        rank_on_node %= cuda.count  # gloo: ranks share the GPUs there are
    return Placement(f"cuda:{rank_on_node}", backend)


def ray_scaling(device: str, backend: str, cluster_gpus: float, workers: int) -> tuple[bool, str]:
    """(ScalingConfig's use_gpu, TorchConfig's backend) for --device and --backend, given the GPUs
    the Ray cluster has. Too few for `cuda` is refused here: Ray would wait for them forever."""
    if device not in DEVICES:
        raise DeviceError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cuda" and cluster_gpus < workers:
        raise DeviceError(f"--device cuda with {workers} Ray worker(s), but the Ray cluster has "
                          f"{cluster_gpus:g} GPU(s); use fewer workers, --device cpu or auto")
    use_gpu = device != "cpu" and cluster_gpus >= workers
    if backend == "nccl" and not use_gpu:
        raise DeviceError("--backend nccl needs CUDA tensors, but this run is on the CPU; use gloo or auto")
    return use_gpu, ("nccl" if use_gpu else "gloo") if backend == "auto" else backend


def apply(placement: Placement):
    """Make this process compute on `placement` reproducibly; returns its torch.device."""
    os.environ.setdefault(*CUBLAS_WORKSPACE)
    import torch
    import torch.utils.deterministic

    torch.use_deterministic_algorithms(True)
    # Deterministic mode also fills every torch.empty with NaN; the loop overwrites what it
    # allocates empty (a resumed model, the checkpoint buffers), and at 1 GB the fill costs seconds.
    torch.utils.deterministic.fill_uninitialized_memory = False
    torch.backends.cudnn.benchmark = False  # a kernel chosen by timing may differ from run to run
    if placement.index is not None:
        torch.cuda.set_device(placement.index)
    return torch.device(placement.device)
