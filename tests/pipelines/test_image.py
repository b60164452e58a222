"""The pinned base images: each Dockerfile installs exactly its lock, the locks are current and hold
the project's pins, the CUDA lock differs from the CPU one in torch's build alone, and every
component and worker names its image's tag."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from backend.pipelines import image_lock
from backend.pipelines.compiled import COMPILED_FILES, load_compiled
from backend.pipelines.images import (
    BASE_IMAGE,
    CUDA_DOCKERFILE,
    CUDA_LOCK_FILE,
    DOCKERFILE,
    LOCK_FILE,
    RAY_PACKAGES,
)
from backend.project import MANIFESTS, PROJECT_ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(\S+)$")


def _instructions(dockerfile: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            lines.append(current.strip())
            current = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _pip_installs(dockerfile: Path) -> list[list[str]]:
    installs = []
    for instruction, args in _instructions(dockerfile):
        if instruction == "RUN":
            for command in args.split("&&"):
                words = shlex.split(command)
                if words[:2] == ["pip", "install"]:
                    installs.append(words[2:])
    return installs


@pytest.mark.parametrize("dockerfile, lock", [(DOCKERFILE, LOCK_FILE), (CUDA_DOCKERFILE, CUDA_LOCK_FILE)],
                         ids=["cpu", "cuda"])
def test_the_dockerfile_pins_equal_the_lock(dockerfile, lock):
    python, pins = image_lock.read_lock(lock)
    [base] = [args for instruction, args in _instructions(dockerfile) if instruction == "FROM"]
    assert base == f"python:{python}-slim", "the base image's Python must be the lock's"

    installs = _pip_installs(dockerfile)
    assert len(installs) == 2, "one install of the lock, one of the project"
    lock_install, project_install = installs
    assert "--no-deps" in lock_install and "-r" in lock_install
    copied = {args.split()[-1]: args.split()[0] for i, args in _instructions(dockerfile) if i == "COPY"}
    assert copied[lock_install[lock_install.index("-r") + 1]] == str(lock.relative_to(PROJECT_ROOT))
    assert "--no-deps" in project_install and "--no-build-isolation" in project_install
    assert project_install[-1] == "."

    # Any version the Dockerfile names itself must be the lock's.
    named = [PIN.match(word) for install in installs for word in install if PIN.match(word)]
    for match in named:
        assert pins[image_lock.canonical(match.group(1))] == match.group(3)


def test_the_lock_is_current_and_holds_the_projects_pins():
    assert LOCK_FILE.read_text() == image_lock.render(image_lock.closure(image_lock.image_requirements())), (
        "manifests/image/requirements.lock is out of date: run `make image-lock`")
    _, pins = image_lock.read_lock()
    project = (PROJECT_ROOT / "pyproject.toml").read_text()
    exact = re.findall(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^"]+)"', project)
    assert exact, "pyproject.toml pins torch, kfp, ray... exactly"
    for name, version in exact:
        assert Version(pins[image_lock.canonical(name)]).public == Version(version).public, name
    assert not set(pins) & image_lock.UI_ONLY, "the image carries no terminal UI"
    for package in RAY_PACKAGES:  # step 8's declared packages are what the image already holds
        name, _, version = package.partition("==")
        assert pins[image_lock.canonical(name.split("[")[0])] == version


def test_the_cuda_lock_is_the_cpu_lock_with_torchs_cuda_build():
    """Same Python, every CPU pin but torch's, torch's public version, the CUDA libraries torch's
    CUDA build loads (NCCL for the process group, cuBLAS for the matmuls), and no CPU build."""
    cpu_python, cpu = image_lock.read_lock(LOCK_FILE)
    cuda_python, cuda = image_lock.read_lock(CUDA_LOCK_FILE)
    assert cuda_python == cpu_python
    assert {n: v for n, v in cpu.items() if n != "torch"}.items() <= cuda.items()
    assert cpu["torch"] == "2.13.0+cpu" and cuda["torch"] == "2.13.0"
    assert {"triton", "nvidia-cublas", "nvidia-nccl-cu13", "nvidia-cudnn-cu13"} <= set(cuda)
    # The CPU image takes torch from PyTorch's CPU index; the CUDA image from the registry alone.
    cpu_lock_install, _ = _pip_installs(DOCKERFILE)
    cuda_lock_install, _ = _pip_installs(CUDA_DOCKERFILE)
    assert any(word.endswith("/whl/cpu") for word in cpu_lock_install)
    assert not [word for word in cuda_lock_install if "index-url" in word or "://" in word]


def test_the_cuda_lock_is_current():
    """Offline: its CPU part is the venv's closure (its CUDA part, resolved by `make image-lock`,
    is taken as written)."""
    cpu = image_lock.closure(image_lock.image_requirements())
    cuda_part = image_lock.cuda_part_of(image_lock.read_lock(CUDA_LOCK_FILE)[1], cpu)
    wanted = image_lock.render(image_lock.cuda_pins(cpu, cuda_part), image_lock.CUDA_HEADER)
    assert CUDA_LOCK_FILE.read_text() == wanted, "the CUDA lock is out of date: run `make image-lock`"
    assert image_lock.main(["--check"]) == 0


def test_components_and_workers_name_the_pinned_tag():
    runtime = yaml.safe_load((MANIFESTS / "runtime.yaml").read_text())
    [job] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    [container] = job["template"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == BASE_IMAGE
    assert f'org.opencontainers.image.version="{BASE_IMAGE.split(":")[1]}"' in DOCKERFILE.read_text()
    assert load_compiled(COMPILED_FILES["local"]).images == [BASE_IMAGE]
    assert set(load_compiled(COMPILED_FILES["kube"]).images) == {BASE_IMAGE, "argostub/createpvc"}
