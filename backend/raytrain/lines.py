"""A launcher process whose stdout is logfmt lines, read as they come with the time each arrived.

Shared by the Ray launcher (the `training.ray_train` driver) and the comparison's torchrun side:
both watch a process print `step=N loss=X rank=R world=W` and `event=...` lines and act on them.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from training.logfmt import parse_line


@dataclass(frozen=True)
class TimedLine:
    time: float  # epoch seconds when the line was read
    text: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def event(self) -> str:
        return self.fields.get("event", "")

    @property
    def step(self) -> int | None:
        """The step of a training-step line (not of an event line that mentions a step)."""
        if self.event or "loss" not in self.fields or "step" not in self.fields:
            return None
        try:
            return int(self.fields["step"])
        except ValueError:
            return None


class LineProcess:
    """One child process: stdout read line by line (and appended to `stdout_log` as
    "<epoch seconds> <line>", the pod log format), stderr appended to a file as it is."""

    def __init__(self, proc: asyncio.subprocess.Process, log_dir: Path, name: str, started: float):
        self.proc = proc
        self.stdout_log = log_dir / f"{name}.log"
        self.stderr_path = log_dir / f"{name}.stderr"
        self.started = started

    @classmethod
    async def start(cls, argv: list[str], env: dict[str, str], cwd: Path, log_dir: Path,
                    name: str) -> LineProcess:
        log_dir.mkdir(parents=True, exist_ok=True)
        started = time.time()
        with open(log_dir / f"{name}.stderr", "ab") as stderr:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=stderr)
        return cls(proc, log_dir, name, started)

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def lines(self) -> AsyncIterator[TimedLine]:
        """Every stdout line until the process closes its stdout."""
        assert self.proc.stdout is not None
        with open(self.stdout_log, "a") as log:
            while raw := await self.proc.stdout.readline():
                line = TimedLine(time.time(), text := raw.decode(errors="replace").rstrip("\n"),
                                 parse_line(text) if "=" in text else {})
                log.write(f"{line.time:.6f} {text}\n")
                log.flush()
                yield line

    async def wait(self) -> int:
        return await self.proc.wait()

    async def stop(self, grace: float = 15.0) -> None:
        """SIGTERM (a launcher cleans up its workers), SIGKILL after `grace` seconds; then reaped."""
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def last_error_line(self, prefix: str = "") -> str:
        """The last stderr line starting with `prefix` (a CLI's one-line error), else ''."""
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        found = [line for line in text.splitlines() if line.startswith(prefix) and line.strip()]
        return found[-1] if found else ""


def python_env(**extra: str) -> dict[str, str]:
    """The environment for a child `python -m training...`: this repo importable, output unbuffered."""
    repo = Path(__file__).resolve().parents[2]
    path = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=f"{repo}{os.pathsep}{path}" if path else str(repo),
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env.update(extra)
    return env

