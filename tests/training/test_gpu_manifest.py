"""manifests/trainjob-gpu.yaml by validation (tests/local/test_gpu_job.py runs it on simulated GPU
nodes): it is a valid Trainer v2.3 TrainJob, runs the CUDA image and the one training command with
--device cuda, and its processes per node follow from its GPUs as Trainer and torchrun derive them."""

from __future__ import annotations

import kubernetes_validate
import pytest
import torch
import yaml
from kubeflow_trainer_api import models as trainer
from torch.distributed.run import determine_local_world_size

from backend.models import parse_manifests
from backend.pipelines.images import CUDA_DOCKERFILE, CUDA_IMAGE
from backend.project import MANIFESTS
from training.ddp import parse_args
from training.launch import ddp_command

GPU_JOB = MANIFESTS / "trainjob-gpu.yaml"
MOUNT = "/checkpoints"


@pytest.fixture
def job() -> dict:
    return yaml.safe_load(GPU_JOB.read_text())


def trainer_nproc_per_node(spec_trainer: dict) -> str:
    """PET_NPROC_PER_NODE as Trainer v2.3's torch plugin sets it (pkg/runtime/framework/plugins/
    torch/torch.go, EnforceMLPolicy): numProcPerNode if given; else "auto" when resourcesPerNode
    asks for a GPU (any resource whose name holds "gpu", requests before limits:
    runtime.GetNumGPUPerNode), else the CPU count, at least 1."""
    if spec_trainer.get("numProcPerNode") is not None:
        return str(spec_trainer["numProcPerNode"])
    resources = spec_trainer.get("resourcesPerNode") or {}

    def gpus(kind: str) -> int:
        return next((int(q) for name, q in (resources.get(kind) or {}).items() if "gpu" in name.lower()), 0)

    if gpus("requests") or gpus("limits"):
        return "auto"
    cpu = (resources.get("requests") or {}).get("cpu") or (resources.get("limits") or {}).get("cpu") or 0
    return str(max(1, int(cpu)))


def test_it_is_a_trainer_v2_3_trainjob_both_platforms_parse(job):
    assert trainer.TrainerV1alpha1TrainJob.from_dict(job).to_dict() == job
    (parsed,) = parse_manifests(GPU_JOB.read_text(), GPU_JOB.name)
    assert parsed.spec.trainer.image == CUDA_IMAGE


def test_it_runs_the_cuda_image_and_the_training_command_on_cuda(job, tmp_path):
    assert job["spec"]["trainer"]["image"] == CUDA_IMAGE
    assert f'org.opencontainers.image.version="{CUDA_IMAGE.split(":")[1]}"' in CUDA_DOCKERFILE.read_text()
    assert job["spec"]["trainer"]["command"] == ddp_command()
    args = [a.replace(MOUNT, str(tmp_path)) for a in job["spec"]["trainer"]["args"]]  # the volume, here
    parsed = parse_args(args)
    assert (parsed.device, parsed.backend) == ("cuda", "auto")  # NCCL, the GPU of each LOCAL_RANK
    assert str(parsed.ckpt_dir).startswith(str(tmp_path))


def test_its_node_resources_validate_and_never_overcommit_the_gpu(job):
    resources = job["spec"]["trainer"]["resourcesPerNode"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] >= 1
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lesson-ddp-gpu-node-0-0"},
           "spec": {"containers": [{"name": "node", "image": CUDA_IMAGE, "resources": resources}]}}
    kubernetes_validate.validate(pod, "1.31", strict=True)


def test_processes_per_node_follow_the_gpus_as_trainer_and_torchrun_derive_them(job, monkeypatch):
    spec_trainer = job["spec"]["trainer"]
    assert "numProcPerNode" not in spec_trainer
    assert trainer_nproc_per_node(spec_trainer) == "auto"
    assert trainer_nproc_per_node({"resourcesPerNode": {"requests": {"cpu": "3"}}}) == "3"  # the rule's other arm
    gpus = int(spec_trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"])
    # torchrun's "auto" in a pod that sees those GPUs: one process each
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: torch.device("cuda"))
    assert determine_local_world_size("auto") == gpus == 1
