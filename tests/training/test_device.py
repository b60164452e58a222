"""The device decision (training/device.py) for machines these tests are not on: what torch.cuda
reports is faked, in the pure decision and in training.ddp's own start-up, and every device or
backend a machine cannot give is one line and exit 2 before anything is written."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from tests.training.conftest import plain_cmd, run
from training import ddp, device
from training.device import Cuda, DeviceError, Placement, decide

NO_GPU, ONE_GPU, TWO_GPUS = Cuda(False, 0), Cuda(True, 1), Cuda(True, 2)


@pytest.mark.parametrize("choice, backend, local_rank, cuda, expected", [
    ("auto", "auto", 0, NO_GPU, Placement("cpu", "gloo")),
    ("cpu", "auto", 3, TWO_GPUS, Placement("cpu", "gloo")),  # GPUs there, CPU asked for
    ("auto", "auto", 1, TWO_GPUS, Placement("cuda:1", "nccl")),  # each rank its LOCAL_RANK's GPU
    ("cuda", "auto", 0, ONE_GPU, Placement("cuda:0", "nccl")),
    ("cuda", "gloo", 1, ONE_GPU, Placement("cuda:0", "gloo")),  # two ranks share the one GPU
    ("cuda", "gloo", 3, TWO_GPUS, Placement("cuda:1", "gloo")),
])
def test_the_device_and_backend_of_each_rank(choice, backend, local_rank, cuda, expected):
    assert decide(choice, backend, local_rank, cuda) == expected


def test_ddp_gets_the_ranks_gpu_and_nothing_on_the_cpu():
    assert Placement("cuda:1", "nccl").ddp_device_ids() == [1]
    assert Placement("cpu", "gloo").ddp_device_ids() is None


@pytest.mark.parametrize("choice, backend, local_rank, cuda, message", [
    ("cuda", "auto", 0, NO_GPU, "--device cuda, but torch sees no CUDA GPU here"),
    ("cuda", "auto", 0, Cuda(True, 0), "--device cuda, but torch sees no CUDA GPU here"),
    ("auto", "nccl", 0, NO_GPU, "--backend nccl needs CUDA tensors, but this run is on the CPU"),
    ("cuda", "nccl", 2, TWO_GPUS, "LOCAL_RANK 2, but 2 GPU(s) are visible and NCCL takes one per rank"),
    ("auto", "auto", 1, ONE_GPU, "LOCAL_RANK 1, but 1 GPU(s) are visible and NCCL takes one per rank"),
    ("tpu", "auto", 0, NO_GPU, "--device must be one of auto, cpu, cuda, got 'tpu'"),
])
def test_what_the_machine_cannot_give_is_one_line_naming_what_was_seen(choice, backend, local_rank, cuda, message):
    with pytest.raises(DeviceError) as raised:
        decide(choice, backend, local_rank, cuda)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_local_rank_comes_from_torchrun():
    assert device.local_rank({}) == 0
    assert device.local_rank({"LOCAL_RANK": "3"}) == 3
    with pytest.raises(DeviceError, match="LOCAL_RANK must be a number of 0 or more, got '-1'"):
        device.local_rank({"LOCAL_RANK": "-1"})


def _fake_gpus(monkeypatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_the_decision_reads_what_torch_cuda_reports(monkeypatch):
    _fake_gpus(monkeypatch, 2)
    assert Cuda.here() == TWO_GPUS
    _fake_gpus(monkeypatch, 0)
    assert Cuda.here() == NO_GPU


@pytest.mark.parametrize("gpus, local_rank, message", [
    (0, "0", "training.ddp: error: --device cuda, but torch sees no CUDA GPU here"),
    (1, "1", "training.ddp: error: LOCAL_RANK 1, but 1 GPU(s) are visible and NCCL takes one per rank"),
])
def test_training_refuses_before_joining_a_group_or_writing(monkeypatch, capsys, tmp_path, gpus, local_rank, message):
    """training.ddp's own start-up on a machine with `gpus` GPUs (as torch.cuda reports them):
    refused before the process group, the model or the checkpoint store exist."""
    _fake_gpus(monkeypatch, gpus)
    monkeypatch.setenv("LOCAL_RANK", local_rank)

    def no_group(backend):
        raise AssertionError(f"joined a {backend} group")

    monkeypatch.setattr(ddp, "_init_process_group", no_group)
    threads = torch.get_num_threads()  # train() sets it
    ckpt_dir = tmp_path / "ckpt"
    try:
        code = ddp.train(ddp.parse_args(["--device", "cuda", "--steps", "3", "--ckpt-dir", str(ckpt_dir)]), [])
    finally:
        torch.set_num_threads(threads)
    assert code == ddp.EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(message)
    assert list(ckpt_dir.iterdir()) == []


def test_cuda_on_this_machine_is_one_line_and_exit_2(tmp_path):
    """The real command on this machine, which has no GPU."""
    ckpt_dir = tmp_path / "ckpt"
    refused = run(plain_cmd("--device", "cuda", "--steps", "3", "--ckpt-dir", str(ckpt_dir)), CUDA_VISIBLE_DEVICES="")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "training.ddp: error: --device cuda, but torch sees no CUDA GPU here (torch.cuda.is_available() is "
        "False); use --device cpu or auto"]
    assert refused.stdout == "" and list(ckpt_dir.iterdir()) == []


@pytest.mark.parametrize("choice, backend, gpus, workers, expected", [
    ("cpu", "auto", 8, 2, (False, "gloo")), ("auto", "auto", 0, 2, (False, "gloo")),
    ("auto", "auto", 1, 2, (False, "gloo")), ("auto", "auto", 2, 2, (True, "nccl")),
    ("cuda", "auto", 4, 2, (True, "nccl")), ("cuda", "gloo", 2, 2, (True, "gloo")),
])
def test_ray_asks_for_gpus_when_the_device_says_so(choice, backend, gpus, workers, expected):
    assert device.ray_scaling(choice, backend, gpus, workers) == expected


def test_ray_refuses_what_its_cluster_cannot_give():
    with pytest.raises(DeviceError, match=r"^--device cuda with 2 Ray worker\(s\), but the Ray cluster has 1 GPU\(s\)"):
        device.ray_scaling("cuda", "auto", 1.0, 2)  # Ray would wait for a second GPU forever
    with pytest.raises(DeviceError, match="^--backend nccl needs CUDA tensors"):
        device.ray_scaling("auto", "nccl", 0, 2)


def test_apply_makes_the_run_deterministic(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    try:
        assert device.apply(Placement("cpu", "gloo")) == torch.device("cpu")
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.utils.deterministic.fill_uninitialized_memory is False
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = True


def test_ray_train_refuses_cuda_its_cluster_lacks_in_one_line(tmp_path):
    """The private Ray of a run on this machine has no GPU: refused before any worker starts."""
    refused = run([sys.executable, "-m", "training.ray_train", "--num-workers", "2", "--steps", "3",
                   "--storage", str(tmp_path), "--device", "cuda"], CUDA_VISIBLE_DEVICES="")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "training.ray_train: error: --device cuda with 2 Ray worker(s), but the Ray cluster has 0 GPU(s); "
        "use fewer workers, --device cpu or auto"]
    assert list(tmp_path.iterdir()) == []  # no run directory


def test_cuda_on_a_simulated_gpu_trains_on_the_cpu_and_says_so():
    """An embedded cluster's node without real GPUs gives a pod simulated IDs
    (backend/local/node/devices.py): `--device cuda` there runs on the CPU with gloo, saying so;
    with no simulated GPU it stays the one-line refusal above."""
    placed = device.decide("cuda", "auto", 0, device.Cuda(False, 0, simulated="GPU-1234"))
    assert (placed.device, placed.backend) == ("cpu", "gloo")
    assert placed.note.startswith("--device cuda on simulated GPU(s) GPU-1234: training on the CPU")
    with pytest.raises(device.DeviceError):
        device.decide("cuda", "auto", 0, device.Cuda(False, 0))


def test_each_local_rank_keeps_its_own_device_id_real_or_simulated():
    """A pod given two GPUs runs one process per GPU; LOCAL_RANK i gets device i, as cuda:i on a
    GPU node. On simulated GPUs (`cuda` or `auto`) the rank computes on the CPU but still holds
    its device id, which its start line records (`gpu=`); a CPU run holds none."""
    two = device.Cuda(False, 0, simulated="GPU-a,GPU-b")
    for wanted in ("cuda", "auto"):
        placed = [device.decide(wanted, "auto", rank, two) for rank in (0, 1)]
        assert [(p.device, p.backend, p.gpu) for p in placed] == [("cpu", "gloo", 0), ("cpu", "gloo", 1)]
        assert placed[0].note.startswith(f"--device {wanted} on simulated GPU(s) GPU-a,GPU-b: training on the CPU")
    assert device.decide("cpu", "auto", 1, two).gpu is None
    assert device.decide("auto", "auto", 1, device.Cuda(True, 2)).gpu == 1 == device.decide(
        "auto", "auto", 1, device.Cuda(True, 2)).index
