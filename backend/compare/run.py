"""Running a comparison: check the plan, measure the Trainer side then the Ray side on the embedded
cluster, save the result, delete older comparisons' jobs and volumes (the package docstring says
what is measured). The sides are imported when a comparison runs: importing this loads no torch,
ray or kubernetes."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable

from backend.cluster import Cluster, InvalidResource, NotFound
from backend.compare.figures import Comparison, ComparisonPlan
from backend.compare.store import save_comparison
from backend.settings import Settings

if TYPE_CHECKING:
    from backend.compare.cluster_run import OnLines


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
                         progress: Callable[[str], None] = lambda text: None,
                         on_lines: "OnLines | None" = None) -> Comparison:
    """Measure both sides one after the other (they share the machine's cores), save, return.
    `on_lines(job, batch)`: each side's log lines as they stream (a killed pod's go with it)."""
    from backend.compare.ray_side import measure_ray
    from backend.compare.resources import runtime, volume as comparison_volume
    from backend.compare.trainer_side import measure_trainer
    from backend.connect import capabilities, connect
    from backend.raytrain.tempdir import ray_temp_dir

    plan = plan or ComparisonPlan()
    check_plan(plan)
    if not capabilities(settings).pods_here:  # both sides measured as processes of this machine
        raise InvalidResource("kfcockpit compare measures on the embedded local cluster "
                              "(--backend local); a Ray side on Kubernetes would need KubeRay")
    ray_temp_dir(settings.home)  # a state root too long for Ray: said now, before the Trainer side runs
    cluster = await asyncio.to_thread(connect, settings)  # may start the embedded cluster
    volume = time.strftime("cmp-%Y%m%d-%H%M%S")
    for resource in (runtime(), comparison_volume(volume)):
        await cluster.apply(resource)
    progress(f"Trainer side: TrainJob {volume}-trainer, {plan.workers} workers, {plan.steps} steps, "
             f"rank {plan.kill_rank} killed at step {plan.kill_at_step}")
    trainer = await measure_trainer(cluster, plan, f"{volume}-trainer", volume, on_lines)
    progress(f"Ray side: RayJob {volume}-ray, same plan (Ray's start-up takes a while)")
    ray = await measure_ray(cluster, plan, f"{volume}-ray", volume, on_lines)
    comparison = Comparison(plan=plan, sides=[trainer, ray])
    save_comparison(settings, comparison)
    await _delete_older(cluster, keep=volume)
    return comparison


async def _delete_older(cluster: Cluster, keep: str) -> None:
    """Earlier comparisons' jobs and volumes: the newest comparison's stay for a look."""
    from backend.compare.resources import NAME

    for job in await cluster.list_jobs():
        owner = job.name.rsplit("-", 1)[0]
        if NAME.match(owner) and owner != keep and job.phase.finished:
            await _delete(cluster, "RayJob" if job.launcher == "ray" else "TrainJob", job.name)
    for volume in await cluster.volumes():
        if NAME.match(volume.name) and volume.name != keep:
            await _delete(cluster, "PersistentVolumeClaim", volume.name)


async def _delete(cluster: Cluster, kind: str, name: str) -> None:
    try:
        await cluster.delete(kind, name)
    except (NotFound, InvalidResource):  # gone meanwhile, or (a volume) still in use
        pass
