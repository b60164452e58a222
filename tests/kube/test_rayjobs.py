"""RayJobs on Kubernetes with KubeRay v1.7.0: the status KubeRay writes as a JobSummary, the pods
KubeRay makes found by its labels, and a cluster without KubeRay showing no RayJobs.

Shapes from upstream v1.7.0: status values in ray-operator/apis/ray/v1/rayjob_types.go, `failed`
counted by rayjob_controller.go checkBackoffLimitAndUpdateStatusIfNeeded; pod labels from
ray-operator/controllers/ray/common/pod.go labelPod (head, workers) and rayjob_controller.go
getSubmitterTemplate (the submitter Job's pod, K8sJobMode)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from backend.kube.pods import log_container, pod_from
from backend.kube.rayjobs import summarize_rayjob
from backend.models import DRIVER_RANK, JobPhase, PodEventType
from tests.kube.conftest import HANG_GUARD, take
from tests.kube.objects import (
    JOBSETS,
    PODS,
    TRAINJOBS,
    job_set,
    now_rfc3339,
    pod_status,
    train_job,
    worker_pod,
)

RAYJOBS = "RayJob"
JOB = "lesson-ray"
CLUSTER = f"{JOB}-x7k2p"  # KubeRay: <job>-<5 random chars> (utils.GenerateRayClusterName)
LESSON = yaml.safe_load((Path(__file__).resolve().parents[2] / "manifests" / "rayjob.yaml").read_text())


def ray_job(name: str = JOB, **status) -> dict:
    job = dict(LESSON, metadata={"name": name, "creationTimestamp": "2026-01-01T10:00:00Z"})
    if status:
        job["status"] = status
    return job


def cluster_labels(node_type: str, group: str, cluster: str = CLUSTER) -> dict:
    """common/pod.go labelPod."""
    return {"ray.io/is-ray-node": "yes", "ray.io/cluster": cluster, "ray.io/node-type": node_type,
            "ray.io/group": group, "ray.io/identifier": f"{cluster}-{node_type}",
            "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}


def ray_pod(name: str, labels: dict, container: str, phase: str = "Running") -> dict:
    status = pod_status(phase)
    for s in status["containerStatuses"]:
        s["name"] = container
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": "kind-worker", "containers": [{"name": container, "image": "rayproject/ray:2.60.0"}]},
            "status": status}


def submitter_pod(job: str = JOB) -> dict:
    """rayjob_controller.go getSubmitterTemplate + the Job controller's labels (Job named after the RayJob)."""
    return ray_pod(f"{job}-sb4tq", {"ray.io/originated-from-cr-name": job, "ray.io/originated-from-crd": "RayJob",
                                    "app.kubernetes.io/created-by": "kuberay-operator",
                                    "batch.kubernetes.io/job-name": job, "job-name": job}, "ray-job-submitter")


def head_pod(cluster: str = CLUSTER) -> dict:
    return ray_pod(f"{cluster}-head-9zq4d", cluster_labels("head", "headgroup", cluster), "ray-head")


def ray_worker_pod(index: int, cluster: str = CLUSTER) -> dict:
    labels = dict(cluster_labels("worker", "workers", cluster), **{"ray.io/worker-group-replica-index": str(index)})
    return ray_pod(f"{cluster}-workers-worker-{index}f8rk", labels, "ray-worker")


# ---------------------------------------------------------------------- the status as a summary


@pytest.mark.parametrize("status, phase, attempt", [
    ({}, JobPhase.CREATED, 0),  # not reconciled yet
    ({"jobDeploymentStatus": "Initializing", "jobStatus": ""}, JobPhase.CREATED, 0),
    ({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, JobPhase.CREATED, 0),
    ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, JobPhase.RUNNING, 0),
    ({"jobDeploymentStatus": "Suspended", "jobStatus": ""}, JobPhase.CREATED, 0),
    ({"jobDeploymentStatus": "Waiting"}, JobPhase.CREATED, 0),
    # backoffLimit: a failed attempt is counted, then Retrying, then a new cluster from Initializing
    ({"jobDeploymentStatus": "Retrying", "jobStatus": "FAILED", "failed": 1}, JobPhase.RESTARTING, 1),
    ({"jobDeploymentStatus": "Initializing", "jobStatus": "", "failed": 1}, JobPhase.RESTARTING, 1),
    ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "failed": 1}, JobPhase.RUNNING, 1),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "failed": 1, "succeeded": 1},
     JobPhase.COMPLETE, 1),
    # the last failure is counted too: a job that never retried ended with failed 1
    ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "failed": 1, "reason": "AppFailed"}, JobPhase.FAILED, 0),
    ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "failed": 3}, JobPhase.FAILED, 2),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, JobPhase.FAILED, 0),  # terminal, not a success
    ({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed"}, JobPhase.FAILED, 0),
])
def test_phase_and_restart_attempt_from_kuberay_status(status, phase, attempt):
    summary = summarize_rayjob(ray_job(**status))
    assert (summary.phase, summary.restart_attempt, summary.launcher) == (phase, attempt, "ray")


def test_summary_of_the_lesson_rayjob_and_of_a_foreign_one():
    done = summarize_rayjob(ray_job(
        jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", rayClusterName=CLUSTER, succeeded=1, failed=0,
        startTime="2026-01-01T10:00:01Z", endTime="2026-01-01T10:02:01Z", message="Job finished successfully."))
    # the lesson's entrypoint: Ray Train's --num-workers 2 and its default --max-failures 3
    assert (done.name, done.num_nodes, done.max_restarts, done.volumes) == (JOB, 2, 3, ["checkpoints"])
    assert done.finished - done.created == 121.0 and done.message == "Job finished successfully."
    running = summarize_rayjob(ray_job(jobDeploymentStatus="Running", jobStatus="RUNNING"))
    assert running.finished is None

    foreign = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "other"},
               "spec": {"entrypoint": "python /home/ray/samples/sample_code.py", "backoffLimit": 2,
                        "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": []}}},
                                           "workerGroupSpecs": [{"groupName": "small", "replicas": 3},
                                                                {"groupName": "big", "minReplicas": 1}]}},
               "status": {"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded", "failed": 3,
                          "message": "The RayJob has passed the activeDeadlineSeconds.\n"}}
    summary = summarize_rayjob(foreign)
    assert (summary.num_nodes, summary.max_restarts, summary.restart_attempt) == (4, 2, 2)
    assert (summary.reason, summary.message) == ("DeadlineExceeded", "The RayJob has passed the activeDeadlineSeconds.")


def test_pods_kuberay_makes_as_cockpit_pods():
    submitter = pod_from(submitter_pod())
    assert (submitter.job, submitter.rank, log_container(submitter_pod())) == (JOB, DRIVER_RANK, "ray-job-submitter")
    head = pod_from(head_pod(), job=JOB)  # no label of a cluster pod names the RayJob
    assert (head.job, head.rank, head.restart_attempt) == (JOB, DRIVER_RANK, 0)
    worker = pod_from(ray_worker_pod(1), job=JOB)
    assert (worker.job, worker.rank, log_container(ray_worker_pod(1))) == (JOB, 1, "ray-worker")
    embedded_driver = {"metadata": {"name": "d", "labels": {
        "jobset.sigs.k8s.io/jobset-name": JOB, "batch.kubernetes.io/job-completion-index": "driver",
        "jobset.sigs.k8s.io/restart-attempt": "2", "ray.io/node-type": "head"}}}
    assert (pod_from(embedded_driver, job="x").job, pod_from(embedded_driver).rank,
            pod_from(embedded_driver).restart_attempt) == (JOB, DRIVER_RANK, 2)


# ---------------------------------------------------------------------- on the wire


def kuberay_job(api, **status) -> None:
    """A RayJob of the lesson, its submitter and its Ray cluster, beside a TrainJob's pod and
    another RayJob's cluster (neither of which is the RayJob's)."""
    api.put(RAYJOBS, ray_job(rayClusterName=CLUSTER, jobDeploymentStatus="Running", jobStatus="RUNNING", **status))
    for pod in (submitter_pod(), head_pod(), ray_worker_pod(0), ray_worker_pod(1),
                worker_pod("lesson-ddp", 0), head_pod("other-abcde")):
        api.put(PODS, pod)


async def test_jobs_include_rayjobs_and_a_rayjob_is_found_by_name(api, cluster):
    api.put(TRAINJOBS, train_job("lesson-ddp"))
    api.put(JOBSETS, job_set("lesson-ddp", ready=0))
    kuberay_job(api)
    jobs = {j.name: j for j in await cluster.list_jobs()}
    assert {n: j.launcher for n, j in jobs.items()} == {"lesson-ddp": "torchrun", JOB: "ray"}
    assert (await cluster.get_job(JOB)).phase == JobPhase.RUNNING

    summaries = cluster.watch_jobs()
    try:
        first = {s.name: s.phase for s in await take(summaries, 2)}
        assert first == {"lesson-ddp": JobPhase.CREATED, JOB: JobPhase.RUNNING}
        api.update(RAYJOBS, JOB, lambda j: j["status"].update(jobDeploymentStatus="Retrying", failed=1))
        (retrying,) = await take(summaries, 1)
        assert (retrying.name, retrying.phase, retrying.restart_attempt) == (JOB, JobPhase.RESTARTING, 1)
        api.update(RAYJOBS, JOB, lambda j: j["status"].update(
            jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", succeeded=1, endTime=now_rfc3339()))
        (done,) = await take(summaries, 1)
        assert (done.phase, done.restart_attempt) == (JobPhase.COMPLETE, 1) and done.finished is not None
    finally:
        await summaries.aclose()
    assert (await cluster.wait_job(JOB, frozenset({JobPhase.COMPLETE}), timeout=HANG_GUARD)).phase == JobPhase.COMPLETE


async def test_a_cluster_without_kuberay_has_no_rayjobs(api, cluster):
    api.unserve(RAYJOBS)
    api.put(TRAINJOBS, train_job("lesson-ddp"))
    api.put(TRAINJOBS, train_job("second", num_nodes=1))
    assert [j.name for j in await cluster.list_jobs()] == ["lesson-ddp", "second"]
    summaries = cluster.watch_jobs()
    try:
        assert sorted(s.name for s in await take(summaries, 2)) == ["lesson-ddp", "second"]
        api.put(TRAINJOBS, train_job("third"))
        assert [s.name for s in await take(summaries, 1)] == ["third"]
    finally:
        await summaries.aclose()


async def test_a_rayjobs_pods_are_its_submitter_and_its_ray_clusters(api, cluster):
    kuberay_job(api)
    pods = await cluster.list_pods(JOB)
    assert [(p.name, p.job, p.rank) for p in pods] == [
        (f"{JOB}-sb4tq", JOB, DRIVER_RANK), (f"{CLUSTER}-head-9zq4d", JOB, DRIVER_RANK),
        (f"{CLUSTER}-workers-worker-0f8rk", JOB, 0), (f"{CLUSTER}-workers-worker-1f8rk", JOB, 1)]

    api.append_log(f"{CLUSTER}-workers-worker-1f8rk", "step=3 loss=0.5 rank=1")
    lines = [line async for batch in cluster.stream_logs(JOB, follow=False) for line in batch]
    assert [(line.pod, line.step) for line in lines] == [(f"{CLUSTER}-workers-worker-1f8rk", 3)]


async def test_pod_watch_of_a_rayjob_waits_for_its_cluster_and_reports_each_pod_once(api, cluster):
    api.put(RAYJOBS, ray_job())  # just created: KubeRay has not named its cluster yet
    events = cluster.watch_pods(JOB)
    try:
        pending = asyncio.ensure_future(take(events, 1))
        await asyncio.to_thread(api.wait_watching, RAYJOBS)
        api.update(RAYJOBS, JOB, lambda j: j.update(status={"rayClusterName": CLUSTER,
                                                            "jobDeploymentStatus": "Initializing"}))
        # the embedded cluster's driver: head and submitter at once, matched by both selectors
        both = ray_pod(f"{JOB}-driver-abcde", dict(cluster_labels("head", "headgroup"), **{
            "ray.io/originated-from-cr-name": JOB, "ray.io/originated-from-crd": "RayJob"}), "node", "Pending")
        api.put(PODS, both)
        (added,) = await pending
        name = both["metadata"]["name"]
        assert (added.type, added.pod.name, added.pod.rank) == (PodEventType.ADDED, name, DRIVER_RANK)
        seen = []
        for change in (lambda: api.put(PODS, ray_worker_pod(0)),
                       lambda: api.update(PODS, name, lambda p: p.update(status=pod_status("Running"))),
                       lambda: api.remove(PODS, name)):
            change()
            seen += [(e.type, e.pod.name, e.pod.phase.value) for e in await take(events, 1)]
        assert seen == [(PodEventType.ADDED, f"{CLUSTER}-workers-worker-0f8rk", "Running"),
                        (PodEventType.MODIFIED, both["metadata"]["name"], "Running"),
                        (PodEventType.DELETED, both["metadata"]["name"], "Running")]
        api.put(PODS, ray_worker_pod(1))  # nothing of the driver came twice: the next event is this
        assert [(e.type, e.pod.rank) for e in await take(events, 1)] == [(PodEventType.ADDED, 1)]
    finally:
        await events.aclose()
