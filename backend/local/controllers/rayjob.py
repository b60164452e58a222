"""The RayJob controller: KubeRay v1.7's RayJob at one machine's scale. A RayJob becomes its driver
pod, and its pods' states become the RayJob's status as KubeRay writes it.

The driver pod `<job>-driver-<5 chars>` runs the entrypoint (registry/strategies/rayjobs.py plans
it) with the head container's image, env and PVC mounts, labelled as KubeRay labels a head and a
submitter's pod (it plays both), owned by the RayJob. The entrypoint starts its own Ray and Ray
Train's workers; the node shows each worker as a pod (node/raypods.py), with the labels this
controller hands it in the driver's annotations. A driver that fails tells why in its container's
termination message (FallbackToLogsOnError).

Status (ray-operator/apis/ray/v1/rayjob_types.go): jobDeploymentStatus Initializing until every
expected worker runs, then Running; Retrying from a running group's loss of a worker until its
next group runs (the driver's restart-attempt label counts the groups, and `failed` counts them,
as KubeRay counts its retries);
Complete (jobStatus SUCCEEDED) or Failed (AppFailed, with the driver's exit and its message) when
the driver ends. A suspended RayJob's driver is deleted (Suspended). One KubeRay's validation
refuses (registry/upstream/kuberay.py; the operator validates in its reconcile, there is no webhook) is marked
ValidationFailed with a Warning event and never runs.
"""

from __future__ import annotations

import copy
import json
from typing import Hashable

from backend.local.controllers.base import Controller, namespaced_key, owner_key
from backend.local.registry.upstream import kuberay
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.strategies.rayjobs import plan_rayjob
from backend.local.registry.strategy import Obj
from backend.models import (
    LABEL_JOB,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    RAY_LABEL_CLUSTER,
    RAY_LABEL_GROUP,
    RAY_LABEL_NODE_TYPE,
    RAY_LABEL_ORIGINATED_CRD,
    RAY_LABEL_ORIGINATED_NAME,
    RayJob,
)

ROLE = "kfcockpit.io/ray-role"  # "driver" or "worker"
WORKERS_ANNOTATION = "kfcockpit.io/ray-workers"  # how many workers a group has (0: not known)
WORKER_LABELS_ANNOTATION = "kfcockpit.io/ray-worker-labels"  # JSON: the labels of its worker pods
IGNORED_ANNOTATION = "kfcockpit.io/ray-ignored"  # runtimeEnvYAML keys not applied here
HEAD_CONTAINER = "ray-head"


def ray_cluster_name(job: str) -> str:
    """The job's Ray cluster, as status.rayClusterName and label ray.io/cluster name it. KubeRay
    makes `<job>-<5 random chars>` (utils.GenerateRayClusterName); the embedded cluster keeps no
    RayCluster object, so a fixed suffix keeps the name stable across controller restarts."""
    return f"{job}-raycluster"


def kuberay_labels(job: RayJob, role: str) -> dict[str, str]:
    """The labels KubeRay v1.7.0 puts on a RayJob's pods, for a pod of `role` "driver" or "worker".

    Cluster pods (ray-operator/controllers/ray/common/pod.go labelPod): is-ray-node, cluster,
    node-type, group, identifier, app.kubernetes.io/name and created-by. The submitter Job's pod
    (rayjob_controller.go getSubmitterTemplate, createNewK8sJob: a Job named after the RayJob)
    names the RayJob in ray.io/originated-from-*. The driver pod plays both the head (where KubeRay
    runs the entrypoint) and the submitter (whose log carries the driver's output), so it has both.
    """
    name = job.metadata.name
    cluster = ray_cluster_name(name)
    if role == "driver":
        node_type, group = "head", "headgroup"
    else:
        groups = job.spec.ray_cluster_spec.worker_group_specs if job.spec.ray_cluster_spec else []
        node_type, group = "worker", (groups[0].group_name if groups else "workers")
    labels = {"ray.io/is-ray-node": "yes", RAY_LABEL_CLUSTER: cluster, RAY_LABEL_NODE_TYPE: node_type,
              RAY_LABEL_GROUP: group, "ray.io/identifier": f"{cluster}-{node_type}",
              "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator",
              LABEL_JOB: name, ROLE: role}
    if role == "driver":
        labels.update({RAY_LABEL_ORIGINATED_NAME: name, RAY_LABEL_ORIGINATED_CRD: "RayJob",
                       "batch.kubernetes.io/job-name": name, "job-name": name,
                       LABEL_RANK: "driver", LABEL_RESTART_ATTEMPT: "0"})
    return labels


def driver_pod(rayjob: Obj) -> Obj:
    """The driver pod of a RayJob: the entrypoint, with the head's image, env and mounts."""
    job = RayJob.model_validate(rayjob)
    plan = plan_rayjob(job)
    meta = rayjob["metadata"]
    head = copy.deepcopy(((((rayjob["spec"].get("rayClusterSpec") or {}).get("headGroupSpec") or {})
                          .get("template") or {}).get("spec")) or {})
    container = (head.get("containers") or [{}])[0]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{meta['name']}-driver-", "namespace": meta["namespace"],
                         "labels": kuberay_labels(job, "driver"),
                         "annotations": {WORKERS_ANNOTATION: str(plan.num_workers),
                                         WORKER_LABELS_ANNOTATION: json.dumps(kuberay_labels(job, "worker")),
                                         IGNORED_ANNOTATION: ",".join(plan.ignored)},
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"restartPolicy": "Never", "volumes": head.get("volumes") or [],
                     "containers": [{"name": HEAD_CONTAINER, "image": container.get("image") or "",
                                     "command": plan.argv,
                                     "env": [{"name": k, "value": v} for k, v in plan.env.items()],
                                     "volumeMounts": container.get("volumeMounts") or [],
                                     "terminationMessagePolicy": "FallbackToLogsOnError"}]}}


class RayJobController(Controller):
    name = "rayjob-controller"

    def __init__(self, client: Client, record: Record):
        super().__init__(client)
        self.record = record
        self.inform("RayJob", lambda _t, obj, _o: self.queue.add(namespaced_key(obj)))
        self.inform("Pod", self._pod_changed)

    def _pod_changed(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        key = owner_key(pod, "RayJob")
        if key is not None:
            self.queue.add(key)

    async def reconcile(self, key: Hashable) -> float | None:
        namespace, name = key
        rayjob = self.client.get("RayJob", namespace, name)
        if rayjob is None or rayjob["metadata"].get("deletionTimestamp"):
            return None
        status = rayjob.get("status") or {}
        if status.get("jobDeploymentStatus") in ("Complete", "Failed"):
            return None
        pods = [p for k, p in self.client.dependents(rayjob["metadata"]["uid"]) if k == "Pod"]
        drivers = [p for p in pods if (p["metadata"].get("labels") or {}).get(ROLE) == "driver"]
        if not drivers and status.get("jobDeploymentStatus") != "ValidationFailed":
            refused = kuberay.validate_rayjob(rayjob)
            if refused is not None:  # KubeRay validates in its reconcile: the job is marked, never run
                reason, message = refused
                self.record(rayjob, "Warning", reason, f"{namespace}/{name}: {message}")
                self._status(rayjob, {"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed",
                                      "message": message})
                return None
        if status.get("jobDeploymentStatus") == "ValidationFailed":
            return None
        if rayjob["spec"].get("suspend"):
            for pod in pods:
                self.client.delete("Pod", namespace, pod["metadata"]["name"], grace=0)
            self._status(rayjob, {"jobDeploymentStatus": "Suspended", "jobStatus": status.get("jobStatus", "")})
            return None
        if not drivers:
            if status.get("startTime"):
                return None  # its driver went without an end (deleted): nothing runs it again
            driver = self.client.create("Pod", driver_pod(rayjob))
            self.record(rayjob, "Normal", "Created", f"Created driver pod {driver['metadata']['name']}")
            self._status(rayjob, {"jobDeploymentStatus": "Initializing", "jobStatus": "PENDING",
                                  "rayClusterName": ray_cluster_name(name), "startTime": self.client.now(),
                                  "failed": 0, "succeeded": 0})
            return None
        self._status(rayjob, self._observed(rayjob, drivers[0], pods))
        return None

    def _observed(self, rayjob: Obj, driver: Obj, pods: list[Obj]) -> Obj:
        labels = driver["metadata"].get("labels") or {}
        attempt = int(labels.get(LABEL_RESTART_ATTEMPT) or 0)
        phase = (driver.get("status") or {}).get("phase")
        status: Obj = {"rayClusterName": ray_cluster_name(rayjob["metadata"]["name"]), "failed": attempt,
                       "succeeded": 0}
        if phase == "Succeeded":
            status.update(jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", succeeded=1, endTime=self.client.now(),
                          message="the driver exited with code 0")
            self.record(rayjob, "Normal", "Completed", "the driver exited with code 0")
            return status
        if phase == "Failed":
            terminated = (((driver.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {}) \
                .get("terminated") or {}
            said = f": {terminated['message'].strip().splitlines()[-1]}" if terminated.get("message") else ""
            message = (f"the driver {driver['metadata']['name']} exited with code {terminated.get('exitCode')}"
                       f"{said}")
            status.update(jobDeploymentStatus="Failed", jobStatus="FAILED", reason="AppFailed", message=message,
                          failed=attempt + 1, endTime=self.client.now())
            self.record(rayjob, "Warning", "Failed", message)
            return status
        expected = int((driver["metadata"].get("annotations") or {}).get(WORKERS_ANNOTATION) or 0)
        workers = [p for p in pods if (p["metadata"].get("labels") or {}).get(ROLE) == "worker"
                   and (p["metadata"].get("labels") or {}).get(LABEL_RESTART_ATTEMPT) == str(attempt)
                   and not p["metadata"].get("deletionTimestamp")]
        all_running = workers and len(workers) >= expected and all(
            (w.get("status") or {}).get("phase") == "Running" for w in workers)
        was = (rayjob.get("status") or {}).get("jobDeploymentStatus")
        if phase == "Running" and all_running:
            status.update(jobDeploymentStatus="Running", jobStatus="RUNNING", message=None)
        elif was in ("Running", "Retrying") or any((w.get("status") or {}).get("phase") == "Failed" for w in workers):
            # a running group lost a worker, or its next group is starting: Ray is retrying
            status.update(jobDeploymentStatus="Retrying", jobStatus="RUNNING",
                          message=f"Ray restarts the worker group, restart attempt {attempt}")
        else:
            status.update(jobDeploymentStatus="Initializing", jobStatus="PENDING" if phase != "Running" else "RUNNING",
                          message=None)
        return status

    def _status(self, rayjob: Obj, wanted: Obj) -> None:
        current = rayjob.get("status") or {}
        merged = {k: v for k, v in {**current, **wanted}.items() if v is not None}
        if merged != current:
            rayjob["status"] = merged
            self.client.update_status("RayJob", rayjob)
