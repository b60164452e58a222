"""The Kubeflow Trainer side of the comparison: the lesson's TrainJob on the embedded cluster,
one worker pod killed mid-run, the group recreated by the failure policy (as JobSet does for a
TrainJob) and resumed from the newest checkpoint on the volume."""

from __future__ import annotations

from backend.cluster import Cluster
from backend.compare.cluster_run import OnLines, measure_job
from backend.compare.figures import ComparisonPlan, Measurement
from backend.compare.resources import trainer_job

TITLE = "Trainer (TrainJob)"
SHORT = {"launch_model": "declared TrainJob", "recovery_model": "JobSet restarts group",
         "owner": "platform team (YAML)", "measured_with": "TrainJob, local cluster"}
DETAIL = {
    "launch_detail": "a TrainJob resource is declared (kubectl apply); the Trainer controller "
                     "creates the worker pods from the TrainingRuntime, with torchrun in each",
    "recovery_detail": "a dead pod fails the group; the JobSet failure policy recreates every pod "
                       "(up to maxRestarts) and the loop resumes from the newest checkpoint on the volume",
    "owner_detail": "the platform team, who own the TrainingRuntime and review the TrainJob YAML "
                    "like any other cluster resource",
}


async def measure_trainer(cluster: Cluster, plan: ComparisonPlan, name: str, volume: str,
                               on_lines: OnLines | None = None) -> Measurement:
    job, run = trainer_job(name, plan, volume)
    figures = await measure_job(cluster, plan, job, volume, run, on_lines)
    return Measurement(side="trainer", title=TITLE, **SHORT, **DETAIL, workers=plan.workers,
                       steps=plan.steps, job=name, run_dir=f"{volume}/{run}", **figures)
