"""Step 10's comparison: the same loop launched as a Kubeflow TrainJob and by Ray Train, measured.

    comparison = await run_comparison(settings)     # both runs, then saved in the workspace
    latest_comparison(settings)                     # the newest saved one (None if never run)
    comparison.rows() / comparison.as_note()        # the table, the note's text

Each side makes one run of the plan (same model, data and steps), SIGKILLs one worker at the same
step and measures launch to first step, recovery, steps lost, final loss and wall time. Importing
this package loads neither torch nor ray.
"""

from __future__ import annotations

import shutil
import time
from typing import Callable

from backend.cluster import InvalidResource
from backend.compare.figures import Comparison, ComparisonPlan, Measurement
from backend.compare.store import latest_comparison, save_comparison
from backend.settings import Settings

__all__ = ["Comparison", "ComparisonPlan", "Measurement", "latest_comparison", "run_comparison",
           "save_comparison", "check_plan"]

_KEEP_WORKDIRS = 1  # the run files of the newest comparison stay for a look; older ones go


def check_plan(plan: ComparisonPlan) -> None:
    """InvalidResource in one line when the plan cannot show a resume from a checkpoint."""
    if plan.kill_rank >= plan.workers:
        raise InvalidResource(f"cannot kill rank {plan.kill_rank}: there are {plan.workers} workers "
                              f"(ranks 0..{plan.workers - 1})")
    if not plan.ckpt_every < plan.kill_at_step < plan.steps:
        raise InvalidResource(
            f"the kill step must come after the first checkpoint and before the end: "
            f"{plan.ckpt_every} < kill step < {plan.steps}, got {plan.kill_at_step}")
    if plan.samples // plan.workers // plan.batch_size < 1:
        raise InvalidResource(f"{plan.samples} samples are too few for {plan.workers} workers x "
                              f"batch {plan.batch_size}")


async def run_comparison(settings: Settings, plan: ComparisonPlan | None = None,
                         progress: Callable[[str], None] = lambda text: None) -> Comparison:
    """Measure both sides one after the other (they share the machine's cores), save, return."""
    from backend.compare.ray_side import measure_ray
    from backend.compare.trainer_side import measure_trainer

    plan = plan or ComparisonPlan()
    check_plan(plan)
    if settings.backend != "local":
        raise InvalidResource("kfcockpit compare measures on the embedded local cluster "
                              "(--backend local); a Ray side on Kubernetes would need KubeRay")
    root = settings.home / "compare"
    workdir = root / time.strftime("run-%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True, exist_ok=True)
    progress(f"Trainer side: torchrun, {plan.workers} workers, {plan.steps} steps, "
             f"rank {plan.kill_rank} killed at step {plan.kill_at_step}")
    trainer = await measure_trainer(plan, workdir)
    progress("Ray side: TorchTrainer on a local Ray, same plan (Ray's start-up takes a while)")
    ray, _ = await measure_ray(settings, plan, workdir)
    comparison = Comparison(plan=plan, sides=[trainer, ray])
    save_comparison(settings, comparison)
    for old in sorted(root.glob("run-*"))[:-_KEEP_WORKDIRS]:
        shutil.rmtree(old, ignore_errors=True)
    return comparison
