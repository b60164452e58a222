"""The venv runs what the tests proved, whatever the registry publishes tomorrow: requirements.lock
satisfies pyproject.toml, the venv holds it exactly, the images' locks are subsets of it, and none
of these checks needs the network (each is also run in a network namespace of its own)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

from backend import lockfile
from backend.pipelines import image_lock
from backend.pipelines.images import CUDA_LOCK_FILE, LOCK_FILE
from backend.project import PROJECT_ROOT


def test_the_lock_satisfies_every_requirement_of_pyproject():
    python, pins = lockfile.read_lock()
    assert python.startswith("3.11."), "the lock is made on the Python CI runs"
    assert lockfile.unsatisfied(pins, lockfile.project_requirements()) == []
    assert pins["torch"] == "2.13.0", "the build (+cpu) is the machine's; the version is the lock's"
    assert "pip" not in pins and "kfcockpit" not in pins


def test_a_requirement_the_lock_no_longer_satisfies_is_named_in_one_line(tmp_path, monkeypatch, capsys):
    pyproject = tmp_path / "pyproject.toml"
    text = (PROJECT_ROOT / "pyproject.toml").read_text()
    assert '"cryptography>=42"' in text
    pyproject.write_text(text.replace('"cryptography>=42"', '"cryptography>=999"'))
    monkeypatch.setattr(lockfile, "PYPROJECT", pyproject)

    assert lockfile.main(["check"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    locked = lockfile.read_lock()[1]["cryptography"]
    assert line == (f"make: pyproject.toml requires cryptography>=999 and requirements.lock has "
                    f"cryptography=={locked}: run `make lock`")


def test_a_requirement_missing_from_the_lock_is_named():
    problems = lockfile.unsatisfied({"torch": "2.13.0"}, [Requirement("torch==2.13.0"), Requirement("rich>=13")])
    assert problems == ["pyproject.toml requires rich>=13 and requirements.lock has no rich"]


def test_the_venv_holds_exactly_the_lock():
    """`pip freeze` of the venv the tests run in equals the lock for every package the lock names
    (torch's local build label aside)."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True, text=True,
                            check=True).stdout
    installed = {}
    for line in frozen.splitlines():
        name, sep, version = line.partition("==")
        if sep:
            installed[lockfile.canonical(name)] = version
    assert lockfile.drift(lockfile.read_lock()[1], installed) == []
    assert lockfile.drift({"rich": "1.0"}, {"rich": "13.0"}) == ["rich is 13.0, the lock says 1.0"]
    assert lockfile.same_version("2.13.0+cpu", "2.13.0") and not lockfile.same_version("2.13.1", "2.13.0")


@pytest.mark.parametrize("image_lock_file", [LOCK_FILE, CUDA_LOCK_FILE], ids=["cpu", "cuda"])
def test_the_images_locks_are_subsets_of_the_venvs(image_lock_file):
    """Every package an image shares with the venv has the venv's version; the CUDA image adds only
    torch's CUDA libraries; the CPU image's torch is the same release's CPU build."""
    venv_python, venv = lockfile.read_lock()
    image_python, image = lockfile.read_lock(image_lock_file)
    assert image_python == venv_python
    for name, version in image.items():
        if name == "torch":
            assert version.split("+")[0] == venv["torch"]
        elif name in venv:
            assert version == venv[name], name
        else:
            assert image_lock_file == CUDA_LOCK_FILE and (name.startswith(("nvidia-", "cuda-")) or name == "triton"), (
                f"{name} is in {image_lock_file.name} but not in requirements.lock")


def _offline(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "--net", "--", sys.executable, *command], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_lock_checks_need_no_network():
    if shutil.which("unshare") is None or _offline("-c", "pass").returncode != 0:
        pytest.skip("no network namespace can be made here (unshare --net needs CAP_SYS_ADMIN)")
    assert _offline("-c", "import socket; socket.create_connection(('1.1.1.1', 443), 2)").returncode != 0
    for command in (["-m", "backend.lockfile", "check"], ["-m", "backend.lockfile", "verify"],
                    ["-m", "backend.pipelines.image_lock", "--check"]):
        done = _offline(*command)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    assert image_lock.main(["--check"]) == 0
