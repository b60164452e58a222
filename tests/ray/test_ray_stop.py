"""A Ray run stopped mid-training (what deleting the job will do): the driver shuts its Ray down on
SIGTERM, says so in its log, and no process of the run is left."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backend.raytrain.leftovers import run_processes
from backend.raytrain.runner import RayRun, RaySpec
from backend.settings import Settings


def test_sigterm_mid_run_shuts_ray_down_and_leaves_no_process(state_root: Path):
    settings = Settings(home=state_root)
    spec = RaySpec(storage=state_root / "stop-volume", train={"steps": 500, "step_delay": 0.1})

    async def stop_after_first_step() -> tuple[list, int, list[int]]:
        run = await RayRun.start(settings, spec)
        seen, running_then = [], []
        async for line in run.lines():
            seen.append(line)
            if line.step == 1 and not running_then:
                running_then = run.leftover_processes()
                run.process.proc.terminate()
        return seen, await run.wait(), running_then

    lines, code, running = asyncio.run(stop_after_first_step())
    assert len(running) > 5, "expected the driver, Ray's processes and two workers"
    assert code == 143
    assert [line.fields["reason"] for line in lines if line.event == "stopped"] == ["SIGTERM"]
    assert max(line.step or 0 for line in lines) < 500
    assert run_processes(spec.name) == []
