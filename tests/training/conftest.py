"""Launch the real training entry point in real processes (torchrun or a plain interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from training.launch import DDP_MODULE, ddp_command, with_python
from training.logfmt import parse_line

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def records(self) -> list[dict[str, str]]:
        return [parse_line(line) for line in self.stdout.splitlines() if "=" in line]

    def events(self, name: str) -> list[dict[str, str]]:
        return [r for r in self.records() if r.get("event") == name]


def torchrun_cmd(nproc: int, *args: str) -> list[str]:
    return with_python(ddp_command("--standalone", f"--nproc-per-node={nproc}", args=args), sys.executable)


def plain_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", DDP_MODULE, *args]


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    e.update(extra)
    return e


def run(cmd: list[str], timeout: float = 240, **extra_env: str) -> Run:
    p = subprocess.run(cmd, cwd=REPO, env=env(**extra_env), capture_output=True, text=True,
                       timeout=timeout)
    return Run(p.returncode, p.stdout, p.stderr)


@pytest.fixture
def ckpt_dir(tmp_path: Path) -> Path:
    return tmp_path / "ckpt"


# A sitecustomize for processes that must run with torch alone, as a GPU machine's python may
# have nothing else: what torch does not depend on is missing (None in sys.modules: `import`
# fails and importlib.util.find_spec finds nothing, as for a package not installed).
WITHOUT_NON_TORCH = """
import sys
for name in ("numpy", "pydantic", "yaml", "ray", "kfp", "kubernetes", "textual", "packaging"):
    sys.modules[name] = None
"""


def torch_alone(directory: Path) -> dict[str, str]:
    """The environment of a process (and its children) that can import torch and this repository
    only: PYTHONPATH leads to a sitecustomize in `directory` that hides everything else."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(WITHOUT_NON_TORCH)
    return env(PYTHONPATH=f"{directory}{os.pathsep}{REPO}")
