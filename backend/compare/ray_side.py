"""The Ray Train side of the comparison: a RayJob on the embedded cluster whose entrypoint runs the
loop under TorchTrainer on a private Ray; one worker pod (a Ray Train worker) killed mid-run, Ray
Train's FailureConfig restarting the group from the survivors' save of the interrupted step (or
the last reported checkpoint when there is none)."""

from __future__ import annotations

from importlib.metadata import version

from backend.cluster import Cluster
from backend.compare.cluster_run import OnLines, measure_job
from backend.compare.figures import ComparisonPlan, Measurement
from backend.compare.resources import ray_job

TITLE = "Ray Train (TorchTrainer)"
SHORT = {"launch_model": "Python fit() in RayJob", "recovery_model": "FailureConfig restart",
         "owner": "ML team (Python)"}
DETAIL = {
    "launch_detail": "the training script itself calls TorchTrainer(...).fit() with a "
                     "ScalingConfig; a RayJob only names that script and the Ray cluster to run it "
                     "on, and Ray starts the worker actors",
    "recovery_detail": "Ray Train's controller sees the dead worker, restarts the worker group "
                       "(FailureConfig max_failures), and the new group resumes from the step the "
                       "survivors saved while Ray tore the old one down (else from the last "
                       "checkpoint reported through ray.train.report)",
    "owner_detail": "the ML team, whose Python script holds the scaling and failure settings "
                    "next to the training loop",
}


async def measure_ray(cluster: Cluster, plan: ComparisonPlan, name: str, volume: str,
                           on_lines: OnLines | None = None) -> Measurement:
    job, run = ray_job(name, plan, volume)
    figures = await measure_job(cluster, plan, job, volume, run, on_lines)
    return Measurement(side="ray", title=TITLE, measured_with=f"RayJob, Ray {version('ray')}", **SHORT,
                       **DETAIL, workers=plan.workers, steps=plan.steps, job=name,
                       run_dir=f"{volume}/{run}", **figures)
