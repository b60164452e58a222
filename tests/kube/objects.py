"""Objects as the platform makes them, for tests to put into the API server (tests/kube/apiserver.py):
a TrainJob's worker pods and their status, a JobSet, a TrainJob as the lesson declares it,
conditions, PodMetrics; the kinds tests name most."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Callable

PODS, PODMETRICS, TRAINJOBS, JOBSETS = "Pod", "PodMetrics", "TrainJob", "JobSet"


def now_rfc3339(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def worker_pod(job: str, rank: int, attempt: int = 0, phase: str = "Pending", name: str | None = None,
               node: str = "kind-control-plane") -> dict:
    """A pod as JobSet + the Job controller make it for a TrainJob's `node` replicated job."""
    name = name or f"{job}-node-0-{rank}-a{attempt}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {
            "jobset.sigs.k8s.io/jobset-name": job,
            "jobset.sigs.k8s.io/restart-attempt": str(attempt),
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "batch.kubernetes.io/job-completion-index": str(rank),
        }},
        "spec": {"nodeName": node, "containers": [{"name": "node", "image": "kfcockpit-base:0.1.0"}]},
        "status": pod_status(phase),
    }


def pod_status(phase: str, exit_code: int | None = None) -> dict:
    status: dict = {"phase": phase}
    if phase == "Pending":
        status["containerStatuses"] = [{"name": "node", "restartCount": 0,
                                        "state": {"waiting": {"reason": "ContainerCreating"}}}]
    elif phase == "Running":
        status["containerStatuses"] = [{"name": "node", "restartCount": 0,
                                        "state": {"running": {"startedAt": now_rfc3339()}}}]
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    else:
        code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
        status["containerStatuses"] = [{"name": "node", "restartCount": 0, "state": {"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error",
            "startedAt": now_rfc3339(-5), "finishedAt": now_rfc3339()}}}]
    return status


def set_phase(phase: str, exit_code: int | None = None) -> Callable[[dict], None]:
    def change(pod: dict) -> None:
        pod["status"] = pod_status(phase, exit_code)
    return change


def pod_metrics(pod: dict, **usage: dict[str, str]) -> dict:
    """The PodMetrics metrics-server reports for a pod: container name -> {"cpu", "memory"}."""
    meta = pod["metadata"]
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {})},
            "timestamp": now_rfc3339(), "window": "15s",
            "containers": [{"name": name, "usage": dict(u)} for name, u in usage.items()]}


def train_job(name: str, num_nodes: int = 2, claim: str = "checkpoints") -> dict:
    """A TrainJob as the lesson declares it (numNodes, the checkpoint PVC via runtimePatches)."""
    pod_spec = {"volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": claim}}],
                "containers": [{"name": "node", "volumeMounts": [{"name": "checkpoints",
                                                                   "mountPath": "/checkpoints"}]}]}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "kfcockpit-torch", "kind": "TrainingRuntime",
                                "apiGroup": "trainer.kubeflow.org"},
                 "trainer": {"numNodes": num_nodes},
                 "runtimePatches": [{"manager": "kfcockpit.io/lesson", "trainingRuntimeSpec": {"template": {"spec": {
                     "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                         "spec": pod_spec}}}}]}}}}]},
    }


def job_set(name: str, restarts: int = 0, ready: int = 0, max_restarts: int = 3) -> dict:
    """The JobSet the Trainer makes from a TrainJob (same name): one `node` Job of N pods."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
        "spec": {"failurePolicy": {"maxRestarts": max_restarts},
                 "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {"parallelism": 2}}}]},
        "status": {"restarts": restarts,
                   "replicatedJobsStatus": [{"name": "node", "ready": ready, "succeeded": 0, "failed": 0,
                                             "active": 1, "suspended": 0}]},
    }


def condition(kind: str, reason: str = "", message: str = "") -> dict:
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": now_rfc3339()}
