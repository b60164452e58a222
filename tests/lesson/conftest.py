"""The lesson engine in real processes: the `kfcockpit` command, real torchrun, a tmp state root."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from backend.settings import Settings

REPO = Path(__file__).resolve().parents[2]
KFCOCKPIT = Path(sys.executable).with_name("kfcockpit")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh state root per test, for this process and every command it starts. An embedded
    cluster a command started there is stopped after the test, as a user would (`cluster down`):
    its controller would otherwise idle ten minutes before it leaves."""
    root = tmp_path / "home"
    monkeypatch.setenv("KFCOCKPIT_HOME", str(root))
    yield root
    if (root / "cluster").exists():
        down = kfcockpit("cluster", "down", home=root, timeout=120)
        assert down.code == 0, down.err


@pytest.fixture
def settings(home: Path) -> Settings:
    return Settings(home=home)


def kfcockpit(*args: str, home: Path, stdin: str | None = None, timeout: float = 900) -> Result:
    env = dict(os.environ, KFCOCKPIT_HOME=str(home), PYTHONUNBUFFERED="1")
    p = subprocess.run([str(KFCOCKPIT), *args], cwd=REPO, env=env, input=stdin,
                       capture_output=True, text=True, timeout=timeout)
    return Result(p.returncode, p.stdout, p.stderr)


def processes_under(home: Path) -> list[str]:
    """Command lines of live processes started for this state root (controllers, pods, tasks)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if str(home) in args or f"KFCOCKPIT_HOME={home}".encode() in environ:
            found.append(f"{proc.name}: {args.strip()}")
    return found
