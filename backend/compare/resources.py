"""The comparison's resources, made from the lesson's committed manifests: the TrainJob of
manifests/trainjob.yaml and the RayJob of manifests/rayjob.yaml running the plan, and a volume of
their own (`cmp-<time>`), so a comparison never touches the lesson's checkpoints and goes away
whole when a newer one replaces it."""

from __future__ import annotations

import re
import shlex

from backend.compare.figures import ComparisonPlan
from backend.models import PersistentVolumeClaim, RayJob, TrainingRuntime, TrainJob, parse_manifests
from backend.project import MANIFESTS
from backend.raytrain.entrypoint import ray_train_argv
from training.options import option_args

NAME = re.compile(r"^cmp-\d{8}-\d{6}$")  # a comparison's volume; its jobs add -trainer, -ray
TRAINER_DIR = "trainer"  # on the volume: the TrainJob's checkpoints and metrics.json
RAY_DIR = "ray"  # on the volume: Ray Train's storage; the run is ray/<job>


def _committed(name: str):
    (resource,) = parse_manifests((MANIFESTS / name).read_text(), f"manifests/{name}")
    return resource


def runtime() -> TrainingRuntime:
    return _committed("runtime.yaml")


def volume(name: str) -> PersistentVolumeClaim:
    claim = _committed("volume.yaml")
    claim.metadata.name = name
    return claim


def trainer_job(name: str, plan: ComparisonPlan, claim: str) -> tuple[TrainJob, str]:
    """The TrainJob and the run directory its metrics.json lands in."""
    job = _committed("trainjob.yaml")
    (mount,) = [m for c, m in job.volume_mounts()]
    job.metadata.name = name
    job.spec.trainer.num_nodes = plan.workers
    job.spec.trainer.args = [*option_args(plan.train_options()), "--ckpt-dir", f"{mount}/{TRAINER_DIR}"]
    for spec in job.pod_patches():
        for pvc in spec.volumes:
            if pvc.persistent_volume_claim:
                pvc.persistent_volume_claim.claim_name = claim
    return job, TRAINER_DIR


def ray_job(name: str, plan: ComparisonPlan, claim: str, max_failures: int = 2) -> tuple[RayJob, str]:
    """The RayJob (its Ray Train run named after the job) and the run directory of its metrics."""
    job = _committed("rayjob.yaml")
    (mount,) = [m for c, m in job.volume_mounts()]
    job.metadata.name = name
    argv = ray_train_argv("python", num_workers=plan.workers, max_failures=max_failures,
                          storage=f"{mount}/{RAY_DIR}", name=name, options=plan.train_options())
    job.spec.entrypoint = shlex.join(argv)
    cluster = job.spec.ray_cluster_spec
    for group in [cluster.head_group_spec, *cluster.worker_group_specs]:
        for pvc in group.template.spec.volumes:
            if pvc.persistent_volume_claim:
                pvc.persistent_volume_claim.claim_name = claim
    return job, f"{RAY_DIR}/{name}"
