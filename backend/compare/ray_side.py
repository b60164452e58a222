"""The Ray Train side of the comparison: the loop under TorchTrainer on a local Ray, one worker
SIGKILLed mid-run, Ray's FailureConfig restarting the group from the last reported checkpoint."""

from __future__ import annotations

import time
from importlib.metadata import version
from pathlib import Path

from backend.compare.figures import ComparisonPlan, Measurement
from backend.compare.observer import ObservationError, RunObserver
from backend.raytrain.runner import RayRun, RaySpec
from backend.settings import Settings

TITLE = "Ray Train (TorchTrainer)"
SHORT = {"launch_model": "Python: fit()", "recovery_model": "FailureConfig restart",
         "owner": "ML team (Python)"}
DETAIL = {
    "launch_detail": "the training script itself calls TorchTrainer(...).fit() with a "
                     "ScalingConfig; Ray starts the worker actors on the Ray cluster",
    "recovery_detail": "Ray Train's controller sees the dead worker, restarts the worker group "
                       "(FailureConfig max_failures) and hands it the last checkpoint reported "
                       "through ray.train.report",
    "owner_detail": "the ML team, whose Python script holds the scaling and failure settings "
                    "next to the training loop",
}


async def measure_ray(settings: Settings, plan: ComparisonPlan, workdir: Path) -> tuple[Measurement, RayRun]:
    """The measurement, and the finished run (its reports and files, for whoever wants more)."""
    spec = RaySpec(storage=workdir / "ray", num_workers=plan.workers, max_failures=2,
                   train=plan.train_options())
    run = await RayRun.start(settings, spec)
    observer = RunObserver(plan, run.started)
    try:
        async for line in run.lines():
            if observer.see(line) is not None:
                await run.kill_worker(plan.kill_rank)
                observer.killed(time.time())
    except BaseException:  # an error or Ctrl-C while measuring: no Ray left running
        await run.stop()
        raise
    code = await run.wait()
    ended = time.time()
    if code != 0:
        raise ObservationError(f"the Ray run {run.name} failed (exit {code}; see {run.process.stderr_path})")
    measurement = Measurement(
        side="ray", title=TITLE, measured_with=f"Ray {version('ray')} on 127.0.0.1", **SHORT, **DETAIL,
        workers=plan.workers, steps=plan.steps, run_dir=str(run.run_dir),
        log_file=str(run.process.stdout_log), **observer.figures(ended, run.metrics()))
    return measurement, run
