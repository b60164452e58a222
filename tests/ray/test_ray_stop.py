"""training.ray_train stopped mid-run (what deleting its RayJob does to the driver pod): the driver
shuts its Ray down on SIGTERM, says so in its log, and every process of the run exits by itself.
The run's processes are told apart by an env marker they all inherit, as pods' processes are
(backend/processes.py). One Ray Train worker: the shutdown is Ray's, whatever the group's size, and
a worker more is a process more importing torch."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from backend.processes import is_zombie_or_gone, marked_processes, sweep, wait_gone_async
from backend.raytrain.entrypoint import ray_train_argv
from backend.raytrain.tempdir import ray_temp_dir
from tests.ray.conftest import REPO
from training.logfmt import parse_line

MARKER = "KFCOCKPIT_TEST_RAY_RUN"


def _live(run: str) -> list[int]:
    return [pid for pid in marked_processes({MARKER: run}) if not is_zombie_or_gone(pid)]


def test_sigterm_mid_run_shuts_ray_down_and_leaves_no_process(state_root: Path):
    run = "stop-mid-run"
    temp_dir = ray_temp_dir(state_root)
    temp_dir.mkdir(parents=True, exist_ok=True)
    argv = ray_train_argv(sys.executable, num_workers=1, storage=str(state_root / "stop-volume"), name=run,
                          temp_dir=str(temp_dir), options={"steps": 500, "step_delay": 0.1})
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", RAY_TMPDIR=str(temp_dir), **{MARKER: run})

    async def stop_after_first_step() -> tuple[list[dict], int, list[int], list[int]]:
        proc = await asyncio.create_subprocess_exec(*argv, cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.DEVNULL)
        seen, running_then = [], []
        async for raw in proc.stdout:
            fields = parse_line(raw.decode(errors="replace"))
            seen.append(fields)
            if fields.get("step") == "1" and "loss" in fields and not running_then:
                running_then = _live(run)
                proc.send_signal(signal.SIGTERM)
        code = await proc.wait()
        left = await wait_gone_async(_live(run), 30.0)  # Ray's own processes exit after the driver
        return seen, code, running_then, left

    try:
        lines, code, running, left = asyncio.run(stop_after_first_step())
    finally:
        sweep({MARKER: run})
    assert len(running) > 4, "expected the driver, Ray's processes and the worker"
    assert code == 143
    assert [f["reason"] for f in lines if f.get("event") == "stopped"] == ["SIGTERM"]
    assert max(int(f["step"]) for f in lines if "step" in f and "loss" in f) < 500
    assert left == [], f"processes of the run still alive 30 s after the driver exited: {left}"
