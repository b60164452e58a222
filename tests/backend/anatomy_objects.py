"""The lesson's TrainJob and runtime as shipped (manifests/), with a JobSet, Jobs and pods of the
shape the Trainer, JobSet and the Job controller give them upstream: the objects `explain` reads,
without a cluster."""

from __future__ import annotations

from pathlib import Path

import yaml

from backend.anatomy.model import JobObjects

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
JOB = "lesson-ddp"


def manifest(name: str) -> dict:
    data = yaml.safe_load((MANIFESTS / name).read_text())
    data["metadata"]["namespace"] = "default"
    return data


def pod(rank: int, attempt: int = 0, node: str = "kfcockpit-worker2") -> dict:
    """Rank `rank`'s pod as upstream leaves it: the runtime's env, the torch plugin's PET_*, the
    Job's index; the patch's volume and the service account's; JobSet's and the Job's labels."""
    job = f"{JOB}-node-0"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{job}-{rank}-ab{rank}cd", "namespace": "default",
            "labels": {"jobset.sigs.k8s.io/jobset-name": JOB, "jobset.sigs.k8s.io/restart-attempt": str(attempt),
                       "jobset.sigs.k8s.io/replicatedjob-name": "node",
                       "batch.kubernetes.io/job-completion-index": str(rank),
                       "batch.kubernetes.io/job-name": job, "job-name": job},
            "annotations": {"kueue.x-k8s.io/safe-to-forcefully-delete": "true",
                            "jobset.sigs.k8s.io/jobset-name": JOB,
                            "batch.kubernetes.io/job-completion-index": str(rank)},
        },
        "spec": {
            "hostname": f"{job}-{rank}", "subdomain": JOB, "nodeName": node,
            "containers": [{
                "name": "node", "image": "kfcockpit-base:0.1.0", "command": ["torchrun", "-m", "training.ddp"],
                "args": ["--steps", "100"],
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
                "env": [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                        {"name": "OMP_NUM_THREADS", "value": "1"},
                        {"name": "PET_RDZV_CONF", "value": "timeout=60"},
                        {"name": "PET_NNODES", "value": "2"},
                        {"name": "PET_NPROC_PER_NODE", "value": "1"},
                        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
                            "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}},
                        {"name": "PET_MASTER_ADDR", "value": f"{JOB}-node-0-0.{JOB}"},
                        {"name": "PET_MASTER_PORT", "value": "29500"}],
                "ports": [{"containerPort": 29500}],
                "volumeMounts": [{"name": "checkpoints", "mountPath": "/checkpoints"},
                                 {"name": "kube-api-access-x1", "mountPath": "/var/run/secrets/kubernetes.io/"
                                  "serviceaccount", "readOnly": True}],
            }],
            "volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}},
                        {"name": "kube-api-access-x1", "projected": {"sources": []}}],
        },
        "status": {"phase": "Running"},
    }


def jobset(restarts: int = 0) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": JOB, "namespace": "default"},
            "spec": {"failurePolicy": {"maxRestarts": 3},
                     "successPolicy": {"operator": "All"},
                     "network": {"enableDNSHostnames": True, "subdomain": JOB},
                     "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                         "parallelism": 2, "completions": 2, "backoffLimit": 0}}}]},
            "status": {"restarts": restarts, "restartsCountTowardsMax": restarts}}


def lesson_objects(pods: tuple[dict, ...] = (pod(0), pod(1))) -> JobObjects:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": f"{JOB}-node-0", "namespace": "default",
                        "labels": {"jobset.sigs.k8s.io/jobset-name": JOB, "jobset.sigs.k8s.io/restart-attempt": "0"}},
           "status": {"active": 2}}
    return JobObjects(trainjob=manifest("trainjob.yaml"), runtime=manifest("runtime.yaml"), jobset=jobset(),
                      jobs=(job,), pods=pods, service=None, service_note="not found")
