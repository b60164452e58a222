"""A KubeRay RayJob (ray.io/v1) as the cockpit's `JobSummary`, and the label selectors of its pods.

Upstream is KubeRay v1.7.0 (what manifests/install/install.sh kuberay installs):
- status (ray-operator/apis/ray/v1/rayjob_types.go RayJobStatus): jobDeploymentStatus is KubeRay's
  own lifecycle (Initializing, Running, Complete, Failed, ValidationFailed, Suspending, Suspended,
  Retrying, Waiting, "" for new), jobStatus the Ray job's (PENDING, RUNNING, STOPPED, SUCCEEDED,
  FAILED, "" for new). Complete means the Ray job reached a terminal jobStatus, which may be a
  failure. `failed` counts failed attempts: +1 each time the deployment turns Failed, before a
  retry (rayjob_controller.go checkBackoffLimitAndUpdateStatusIfNeeded), so the retries made so far
  are `failed`, less the final failure of a job that ended Failed.
- pods: the Ray cluster's head and workers carry ray.io/cluster=<status.rayClusterName>
  (common/pod.go labelPod); the RayCluster's ray.io/originated-from-* labels do not reach them.
  The submitter Job's pod (K8sJobMode) carries ray.io/originated-from-cr-name=<RayJob>
  (rayjob_controller.go getSubmitterTemplate). A RayJob's pods are the union of both selectors.
The embedded cluster writes the same status and labels (backend/local/controllers/rayjob.py), so one
reading serves both.
"""

from __future__ import annotations

import posixpath
import shlex

from pydantic import ValidationError

from backend.kube.pods import parse_time
from backend.models import RAY_LABEL_CLUSTER, RAY_LABEL_ORIGINATED_NAME, JobPhase, JobSummary, RayJob, on_claim
from backend.raytrain.entrypoint import ray_train_args
from training.options import option_value

# JobDeploymentStatus values (rayjob_types.go).
FAILED_DEPLOYMENTS = ("Failed", "ValidationFailed")


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0


def ray_train_counts(entrypoint: str) -> tuple[int, int] | None:
    """(workers, max failures) of an entrypoint running the cockpit's `training.ray_train`: Ray
    Train restarts its worker group itself, up to --max-failures. None for any other entrypoint."""
    from training.ray_train import DEFAULT_MAX_FAILURES, DEFAULT_NUM_WORKERS

    try:
        args = ray_train_args(shlex.split(entrypoint))
    except ValueError:
        return None
    if args is None:
        return None
    workers, failures = option_value(args, "--num-workers"), option_value(args, "--max-failures")
    return (int(workers) if workers and workers.isdigit() else DEFAULT_NUM_WORKERS,
            int(failures) if failures and failures.isdigit() else DEFAULT_MAX_FAILURES)


def _worker_replicas(spec: dict) -> int:
    groups = ((spec.get("rayClusterSpec") or {}).get("workerGroupSpecs")) or []
    return sum(_int(g.get("replicas", g.get("minReplicas"))) for g in groups)


def _volumes(raw: dict) -> tuple[list[str], list[tuple[str, str]]]:
    """(claims mounted on the head, (claim, run directory) of a Ray Train entrypoint's
    <storage>/<name>, or its storage when the name is Ray Train's random one): where goodput finds
    its record."""
    try:
        job = RayJob.model_validate(raw)
    except ValidationError:
        return [], []  # a RayJob the cockpit did not write: show it, without volumes
    mounts = job.volume_mounts()
    try:
        args = ray_train_args(shlex.split(job.spec.entrypoint)) or []
    except ValueError:
        args = []
    storage, name = option_value(args, "--storage"), option_value(args, "--name")
    run = on_claim(posixpath.join(storage, name or ""), mounts) if storage else None
    return [claim for claim, _ in mounts], [run] if run else []


def rayjob_phase(status: dict) -> JobPhase:
    deployment = status.get("jobDeploymentStatus") or ""
    job_status = status.get("jobStatus") or ""
    if deployment == "Complete":
        return JobPhase.COMPLETE if job_status == "SUCCEEDED" else JobPhase.FAILED
    if deployment in FAILED_DEPLOYMENTS:
        return JobPhase.FAILED
    if deployment == "Running" and job_status == "RUNNING":
        return JobPhase.RUNNING
    if deployment == "Retrying" or restart_attempt(status):
        return JobPhase.RESTARTING  # a new attempt after a failure, not running yet
    return JobPhase.CREATED  # new, Initializing, Waiting, Suspended, or the Ray job still PENDING


def restart_attempt(status: dict) -> int:
    failed = _int(status.get("failed"))
    return max(0, failed - (1 if status.get("jobDeploymentStatus") in FAILED_DEPLOYMENTS else 0))


def summarize_rayjob(raw: dict) -> JobSummary:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    phase = rayjob_phase(status)
    volumes, run_dirs = _volumes(raw)
    counts = ray_train_counts(str(spec.get("entrypoint") or ""))
    # The cockpit's own entrypoint says how many Ray Train workers run and how often Ray restarts
    # them; any other RayJob: its worker replicas and KubeRay's retries (backoffLimit).
    num_nodes, max_restarts = counts if counts else (_worker_replicas(spec), _int(spec.get("backoffLimit")))
    return JobSummary(
        name=meta.get("name", ""),
        phase=phase,
        num_nodes=num_nodes or 1,
        restart_attempt=restart_attempt(status),
        max_restarts=max_restarts,
        uid=str(meta.get("uid") or ""),
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        finished=parse_time(status.get("endTime")) if phase.finished else None,
        reason=str(status.get("reason") or ""),
        message=" ".join(str(status.get("message") or "").split()),
        volumes=volumes,
        run_dirs=run_dirs,
        launcher="ray",
    )


def cluster_name(raw: dict) -> str:
    return str((raw.get("status") or {}).get("rayClusterName") or "")


def pod_selectors(raw: dict) -> list[str]:
    """Label selectors whose union is the RayJob's pods: its submitter's, its Ray cluster's (once
    KubeRay has named the cluster, on its first reconcile)."""
    selectors = [f"{RAY_LABEL_ORIGINATED_NAME}={raw['metadata']['name']}"]
    if cluster_name(raw):
        selectors.append(f"{RAY_LABEL_CLUSTER}={cluster_name(raw)}")
    return selectors
