"""Run the Ray Train variant of the training loop from the backend, and watch it.

`RayRun.start(settings, spec)` launches `python -m training.ray_train` (the driver, which starts a
private Ray on 127.0.0.1) as a child process with Ray's temp files under the state root:

    <home>/ray/session_*/            Ray's sessions (logs, sockets); finished ones are pruned
    <home>/ray/drivers/<run>.log     the driver's stdout: every worker's lines, time-stamped
    <home>/ray/drivers/<run>.stderr  the driver's stderr: Ray's own messages

Its stdout is the workers' logfmt lines. While you read `lines()` the run keeps track of the
current worker group (rank -> pid, restart attempt) from the `event=start` lines; `wait()`
returns the driver's exit code once every Ray process of the run is gone (stragglers are killed).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from backend.cluster import InvalidResource
from backend.raytrain.groups import WorkerGroups
from backend.raytrain.leftovers import MARKER, reap_async, run_processes
from backend.raytrain.lines import LineProcess, TimedLine, option_args, python_env
from backend.raytrain.tempdir import prune_sessions, ray_temp_dir
from backend.settings import Settings
from training.ray_train import new_run_name

EXIT_USAGE = 2


@dataclass
class RaySpec:
    """One run of training.ray_train: Ray's knobs, and the loop's options as training.ddp takes
    them ({"steps": 40, "ckpt_every": 5, "step_delay": 0.1, ...})."""

    storage: Path  # the volume directory; the run writes under <storage>/<name>/
    num_workers: int = 2
    max_failures: int = 3
    report_every: int | None = None  # default: at every checkpoint
    train: dict[str, int | float] = field(default_factory=dict)
    name: str = field(default_factory=new_run_name)

    def argv(self, temp_dir: Path) -> list[str]:
        args = [sys.executable, "-m", "training.ray_train", "--num-workers", str(self.num_workers),
                "--max-failures", str(self.max_failures), "--storage", str(self.storage),
                "--name", self.name, "--temp-dir", str(temp_dir), *option_args(self.train)]
        if self.report_every is not None:
            args += ["--report-every", str(self.report_every)]
        return args


@dataclass
class Worker:
    rank: int
    pid: int
    attempt: int  # 0 for the first worker group, +1 for each group Ray restarts
    started: float


class RayRun:
    def __init__(self, spec: RaySpec, process: LineProcess, temp_dir: Path):
        self.spec = spec
        self.process = process
        self.temp_dir = temp_dir
        self.workers: dict[int, Worker] = {}  # the current group, as of the lines read so far
        self.groups = WorkerGroups()

    @classmethod
    async def start(cls, settings: Settings, spec: RaySpec) -> RayRun:
        temp_dir = ray_temp_dir(settings.home)
        temp_dir.mkdir(parents=True, exist_ok=True)
        prune_sessions(temp_dir)
        # RAY_TMPDIR: Ray Train's lock files go there too, not to /tmp
        process = await LineProcess.start(
            spec.argv(temp_dir), python_env(**{MARKER: spec.name, "RAY_TMPDIR": str(temp_dir)}),
            cwd=Path(settings.home),
            log_dir=temp_dir / "drivers", name=spec.name)
        return cls(spec, process, temp_dir)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def attempt(self) -> int:
        """The current group's restart attempt (-1 before any worker started)."""
        return self.groups.attempt

    @property
    def started(self) -> float:
        return self.process.started

    async def lines(self) -> AsyncIterator[TimedLine]:
        async for line in self.process.lines():
            if line.event == "start":
                self._worker_started(line)
            yield line

    def _worker_started(self, line: TimedLine) -> None:
        rank, pid = int(line.fields["rank"]), int(line.fields["pid"])
        self.groups.started(rank, pid)
        self.workers[rank] = Worker(rank, pid, self.attempt, line.time)

    async def wait(self) -> int:
        """The driver's exit code, after every Ray process of the run has exited.

        Exit 2 (the driver refused its arguments) becomes InvalidResource with its one line."""
        code = await self.process.wait()
        await reap_async(self.name)
        if code == EXIT_USAGE:
            raise InvalidResource(self.process.last_error_line("training.ray_train: error: ")
                                  .removeprefix("training.ray_train: error: ") or
                                  f"training.ray_train refused its arguments (see {self.process.stderr_path})")
        return code

    def leftover_processes(self) -> list[int]:
        return run_processes(self.name)
