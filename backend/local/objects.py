"""Kubernetes objects for what the embedded cluster's runners observe: a runner's Pod becomes a
core/v1 Pod, its JobSummary the TrainJob's status and the JobSet the Trainer creates for it, and
the machine one Node. Shapes, labels and condition types follow upstream: the pod labels JobSet
v0.12 and the Job controller set, TrainJob conditions Complete/Failed/Suspended (trainer v2.3.0
pkg/apis/trainer/v1alpha1/trainjob_types.go; there is no Created condition), JobSet
status.restarts and its Completed/Failed conditions.
"""

from __future__ import annotations

import platform
import socket
import time
import uuid
from typing import Any

from backend.local.apiserver import crds
from backend.local.rayplan import ray_cluster_name
from backend.models import TRAINER_CONTAINER, JobPhase, JobSummary, Pod, PodPhase

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
MAX_PODS = 110  # the kubelet's default maxPods: the node's allocatable pods
_UID_NAMESPACE = uuid.UUID("6f1c3d0e-5b7a-4c1e-9a43-2f6b8f0d7c11")


def rfc3339(epoch: float | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)) if epoch else None


def stable_uid(*parts: str) -> str:
    """The same uid for the same object across controller restarts (pods are re-derived)."""
    return str(uuid.uuid5(_UID_NAMESPACE, "/".join(parts)))


def owner(obj: dict[str, Any], controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}


def _container_state(pod: Pod) -> dict[str, Any]:
    if pod.phase == PodPhase.RUNNING:
        return {"running": {"startedAt": rfc3339(pod.started)}}
    if pod.phase.finished:
        reason = "Completed" if pod.exit_code == 0 else ("OOMKilled" if pod.reason == "OOMKilled" else "Error")
        state = {"exitCode": pod.exit_code if pod.exit_code is not None else 137, "reason": reason,
                 "startedAt": rfc3339(pod.started or pod.created), "finishedAt": rfc3339(pod.finished)}
        if pod.reason and pod.reason not in ("Completed", "Error"):
            state["message"] = pod.reason
        return {"terminated": state}
    return {"waiting": {"reason": "ContainerCreating"}}


def pod_object(pod: Pod, namespace: str, owner_ref: dict[str, Any] | None, spec: dict[str, Any]) -> dict[str, Any]:
    """A core/v1 Pod for a runner's pod. `spec`: the container command/env the runner runs."""
    labels = dict(pod.labels)
    index = labels.get("batch.kubernetes.io/job-completion-index")
    if index is not None and index.isdigit():
        labels.setdefault("batch.kubernetes.io/job-name", f"{pod.job}-node-0")
        labels.setdefault("job-name", f"{pod.job}-node-0")
        labels.setdefault("jobset.sigs.k8s.io/replicatedjob-name", TRAINER_CONTAINER)
        labels.setdefault("jobset.sigs.k8s.io/job-index", "0")
        labels.setdefault("trainer.kubeflow.org/trainjob-ancestor-step", "trainer")
    ready = pod.phase == PodPhase.RUNNING
    scheduled_at = rfc3339(pod.created)
    unbound = pod.phase == PodPhase.PENDING and not pod.node
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_at},
        {"type": "Initialized", "status": "True", "lastTransitionTime": scheduled_at},
        {"type": "ContainersReady", "status": str(ready), "lastTransitionTime": rfc3339(pod.started) or scheduled_at},
        {"type": "Ready", "status": str(ready), "lastTransitionTime": rfc3339(pod.started) or scheduled_at},
    ]
    meta = _pod_meta(pod, namespace, labels, index, owner_ref)
    if unbound:  # not bound yet; what the default scheduler leaves on a pod it cannot bind
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                       "message": pod.message, "lastTransitionTime": scheduled_at}] \
            if pod.reason == "Unschedulable" else []
        return {"apiVersion": "v1", "kind": "Pod", "metadata": _pod_meta(pod, namespace, labels, index, owner_ref),
                "spec": {"restartPolicy": "Never", "schedulerName": "default-scheduler",
                         "serviceAccountName": "default", "terminationGracePeriodSeconds": 30, **spec},
                "status": {"phase": "Pending", "conditions": conditions, "qosClass": qos(spec)}}
    status: dict[str, Any] = {
        "phase": pod.phase.value, "conditions": conditions, "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}], "startTime": scheduled_at, "qosClass": qos(spec),
        "containerStatuses": [{"name": TRAINER_CONTAINER, "ready": ready, "started": ready,
                               "restartCount": pod.restarts, "image": pod.image or "local",
                               "imageID": "", "containerID": f"process://{pod.name}",
                               "state": _container_state(pod)}],
    }
    if pod.phase.finished and pod.reason:
        status["reason"] = pod.reason if pod.reason in ("Evicted", "DeadlineExceeded") else None
        status = {k: v for k, v in status.items() if v is not None}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": pod.node or socket.gethostname(), "restartPolicy": "Never",
                     "schedulerName": "default-scheduler", "serviceAccountName": "default",
                     "terminationGracePeriodSeconds": 30, **spec},
            "status": status}


def _pod_meta(pod: Pod, namespace: str, labels: dict[str, str], index: str | None,
              owner_ref: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": pod.name, "namespace": namespace, "labels": labels,
                            "uid": stable_uid("pod", namespace, pod.name), "creationTimestamp": rfc3339(pod.created),
                            "annotations": {"batch.kubernetes.io/job-completion-index": index} if index else {}}
    if owner_ref:
        meta["ownerReferences"] = [owner_ref]
    return meta


def qos(spec: dict[str, Any]) -> str:
    resources = [c.get("resources") or {} for c in spec.get("containers") or []]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(r.get("limits") and (r.get("requests") or r["limits"]) == r["limits"] for r in resources)
    return "Guaranteed" if guaranteed else "Burstable"


def trainjob_status(summary: JobSummary, suspended: bool = False) -> dict[str, Any]:
    conditions = []
    for c in summary.conditions:
        if c.type in ("Complete", "Failed", "Suspended"):
            conditions.append({"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                               "lastTransitionTime": c.last_transition_time or rfc3339(summary.finished)})
    if suspended:
        conditions.append({"type": "Suspended", "status": "True", "reason": "Suspended",
                           "message": "TrainJob is suspended", "lastTransitionTime": rfc3339(time.time())})
    active = 0 if summary.phase.finished or suspended else summary.num_nodes
    succeeded = summary.num_nodes if summary.phase == JobPhase.COMPLETE else 0
    status: dict[str, Any] = {"jobsStatus": [{"name": TRAINER_CONTAINER, "active": active, "ready": active,
                                              "succeeded": succeeded,
                                              "failed": 1 if summary.phase == JobPhase.FAILED else 0,
                                              "suspended": 0}]}
    if conditions:
        status["conditions"] = conditions
    return status


# KubeRay v1.7.0 ray-operator/apis/ray/v1/rayjob_types.go: JobDeploymentStatus, JobStatus and
# JobFailedReason values. A Ray Train group restart is shown as Retrying (KubeRay's "a new attempt
# after a failure"), counted in `failed` as KubeRay counts its retries
# (rayjob_controller.go checkBackoffLimitAndUpdateStatusIfNeeded: +1 per Failed deployment).
_RAY_DEPLOYMENT = {JobPhase.CREATED: "Initializing", JobPhase.RUNNING: "Running", JobPhase.RESTARTING: "Retrying",
                   JobPhase.COMPLETE: "Complete", JobPhase.FAILED: "Failed"}
_RAY_JOB_STATUS = {JobPhase.CREATED: "PENDING", JobPhase.COMPLETE: "SUCCEEDED", JobPhase.FAILED: "FAILED"}
_RAY_FAILED_REASONS = {"SubmissionFailed", "DeadlineExceeded", "PreRunningDeadlineExceeded", "AppFailed",
                       "JobDeploymentStatusTransitionGracePeriodExceeded", "JobStatusCheckTimeoutExceeded",
                       "ValidationFailed"}


def rayjob_status(summary: JobSummary) -> dict[str, Any]:
    """A RayJob's status as KubeRay writes it, from the runner's summary."""
    failed = summary.phase == JobPhase.FAILED
    status: dict[str, Any] = {
        "jobStatus": _RAY_JOB_STATUS.get(summary.phase, "RUNNING"),
        "jobDeploymentStatus": _RAY_DEPLOYMENT[summary.phase],
        "rayClusterName": ray_cluster_name(summary.name),
        "startTime": rfc3339(summary.created),
        "failed": summary.restart_attempt + int(failed),
        "succeeded": int(summary.phase == JobPhase.COMPLETE),
    }
    if failed:  # a reason of the cockpit's own (DriverLost) is told in the message
        status["reason"] = summary.reason if summary.reason in _RAY_FAILED_REASONS else "AppFailed"
    if summary.message:
        status["message"] = summary.message
    if summary.finished:
        status["endTime"] = rfc3339(summary.finished)
    return status


def jobset_object(summary: JobSummary, namespace: str, trainjob: dict[str, Any]) -> dict[str, Any]:
    conditions = []
    terminal = None
    if summary.phase == JobPhase.COMPLETE:
        terminal = "Completed"
        conditions.append({"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                           "message": "jobset completed successfully", "lastTransitionTime": rfc3339(summary.finished)})
    elif summary.phase == JobPhase.FAILED:
        terminal = "Failed"
        conditions.append({"type": "Failed", "status": "True", "reason": summary.reason or "FailedJobs",
                           "message": summary.message, "lastTransitionTime": rfc3339(summary.finished)})
    status: dict[str, Any] = {"restarts": summary.restart_attempt, "conditions": conditions,
                              "replicatedJobsStatus": [{"name": TRAINER_CONTAINER, "ready": 0 if terminal else 1,
                                                        "succeeded": 1 if terminal == "Completed" else 0,
                                                        "failed": 1 if terminal == "Failed" else 0,
                                                        "active": 0 if terminal else 1, "suspended": 0}]}
    if terminal:
        status["terminalState"] = terminal
    jobset = {"apiVersion": JOBSET_API, "kind": "JobSet",
              "metadata": {"name": summary.name, "namespace": namespace,
                           "uid": stable_uid("jobset", namespace, summary.name),
                           "creationTimestamp": rfc3339(summary.created),
                           "labels": {"trainer.kubeflow.org/trainjob-name": summary.name},
                           "ownerReferences": [owner(trainjob)]},
              "spec": {"failurePolicy": {"maxRestarts": summary.max_restarts},
                       "replicatedJobs": [{"name": TRAINER_CONTAINER, "replicas": 1,
                                           "template": {"spec": {"parallelism": summary.num_nodes,
                                                                 "completions": summary.num_nodes,
                                                                 "completionMode": "Indexed", "backoffLimit": 0}}}],
                       "suspend": False},
              "status": status}
    crds.default_jobset(jobset)  # what JobSet's defaulting webhook adds to the one the Trainer creates
    return jobset


def meminfo() -> dict[str, int]:
    found = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found


def node_object(cpu: float, memory: float) -> dict[str, Any]:
    """The one Node: this machine, with its CPUs and memory (or those set at `cluster up`) as
    capacity and allocatable."""
    cores = f"{int(cpu)}" if cpu == int(cpu) else f"{int(cpu * 1000)}m"
    resources = {"cpu": cores, "memory": f"{int(memory) // 1024}Ki", "pods": str(MAX_PODS),
                 "ephemeral-storage": "0"}
    name = socket.gethostname()
    uname = platform.uname()
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": stable_uid("node", name),
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": uname.machine.replace("x86_64", "amd64"),
                                    "node-role.kubernetes.io/control-plane": ""}},
            "spec": {},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "the embedded cluster's kubelet runs pods as processes",
                                       "lastTransitionTime": rfc3339(time.time())}],
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"kubeletVersion": "v1.36.0-kfcockpit", "osImage": platform.platform(),
                                    "kernelVersion": uname.release, "operatingSystem": "linux",
                                    "architecture": uname.machine, "containerRuntimeVersion": "process://",
                                    "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""}}}


TRAINER_NAMESPACE = "kubeflow-system"
# The labels of the Trainer's controller-manager Deployment's pods (kubeflow/trainer
# manifests/base/manager/manager.yaml), by which `kubectl get pods -l` and preflights find it.
TRAINER_MANAGER_LABELS = {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager",
                          "app.kubernetes.io/part-of": "kubeflow"}


def controller_pod(name: str, pid: int, started: float) -> dict[str, Any]:
    """The Trainer controller as a Pod: on the embedded cluster it is the controller process
    itself (pid), Running and Ready for as long as the API that shows it answers."""
    since = rfc3339(started)
    container = {"name": "manager", "image": "kfcockpit.io/embedded-controller:local", "imageID": "",
                 "ready": True, "started": True, "restartCount": 0, "state": {"running": {"startedAt": since}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": TRAINER_NAMESPACE, "labels": dict(TRAINER_MANAGER_LABELS),
                         "annotations": {"kfcockpit.io/pid": str(pid)}},
            "spec": {"containers": [{"name": "manager", "image": container["image"],
                                     "command": ["python", "-m", "backend.local.controller"]}],
                     "nodeName": socket.gethostname(), "restartPolicy": "Always",
                     "serviceAccountName": "default", "schedulerName": "default-scheduler"},
            "status": {"phase": "Running", "hostIP": "127.0.0.1", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}],
                       "startTime": since, "qosClass": "BestEffort", "containerStatuses": [container],
                       "conditions": [{"type": kind, "status": "True", "lastTransitionTime": since}
                                      for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]}}


def pod_spec(runner) -> dict:
    """The container a runner's pods run, as a PodSpec fragment (command, args, env, image)."""
    plan = getattr(runner, "plan", None)
    container = {"name": "node", "image": getattr(plan, "image", "") or "local"}
    for field in ("command", "args"):
        value = getattr(plan, field, None)
        if value:
            container[field] = list(value)
    env = getattr(plan, "env", None)
    if isinstance(env, dict) and env:
        container["env"] = [{"name": k, "value": str(v)} for k, v in env.items()]
    requests = getattr(plan, "requests", None)
    if requests:
        container["resources"] = {"requests": dict(requests)}
    spec: dict = {"containers": [container]}
    if getattr(plan, "restart_policy", None):  # a TrainJob's pods: their JobSet's pod template
        spec["restartPolicy"] = plan.restart_policy
    return spec

