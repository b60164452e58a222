"""The lesson's RayJob (manifests/rayjob.yaml, a shorter run) driven through the kube backend
(`KubeCluster` on the embedded cluster's kubeconfig), as the cockpit will drive it (issue 13): the
job read from the status KubeRay v1.7.0 would write, its pods found by KubeRay's labels, a killed
worker pod making Ray restart the group, the job completing, and delete removing it.

One Ray run (slow on two cores) serves every assertion. It has an embedded cluster of its own, on
a short state root: Ray's socket paths under <home>/ray must stay within 107 bytes."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from backend.cluster import NotFound
from backend.models import (
    DRIVER_RANK,
    RAY_LABEL_CLUSTER,
    RAY_LABEL_NODE_TYPE,
    RAY_LABEL_ORIGINATED_NAME,
    JobPhase,
    JobSummary,
    LogLine,
    Pod,
    PodEvent,
    PodEventType,
    parse_manifests,
)
from tests.conformance.conftest import REPO, WAIT, embedded_cluster

JOB = "cl-ray"
STEPS = 40
KILL_AT_STEP = 8  # after the checkpoint of step 5 (the job checkpoints every 5)


def lesson_rayjob(name: str) -> object:
    """manifests/rayjob.yaml under another name, on its own storage, with fewer steps."""
    data = yaml.safe_load((REPO / "manifests" / "rayjob.yaml").read_text())
    data["metadata"]["name"] = name
    data["spec"]["entrypoint"] = (f"python -m training.ray_train --num-workers 2 --steps {STEPS} "
                                  f"--storage /checkpoints/{name} --step-delay 0.2")
    (job,) = parse_manifests(yaml.safe_dump(data))
    return job


@dataclass
class Run:
    applied: str = ""
    first: JobSummary | None = None
    listed: list[JobSummary] = field(default_factory=list)
    pod_events: list[PodEvent] = field(default_factory=list)
    jobs: list[JobSummary] = field(default_factory=list)
    lines: list[LogLine] = field(default_factory=list)
    killed: Pod | None = None
    final: JobSummary | None = None
    final_pods: list[Pod] = field(default_factory=list)
    status: dict = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # pods the watch saw deleted after the RayJob was
    after_delete: Exception | None = None
    listed_after_delete: list[JobSummary] = field(default_factory=list)


async def _run(cluster) -> Run:
    run = Run()
    for volume in parse_manifests((REPO / "manifests" / "volume.yaml").read_text()):
        await cluster.apply(volume)
    run.applied = await cluster.apply(lesson_rayjob(JOB))
    run.first = await cluster.get_job(JOB)
    run.listed = await cluster.list_jobs()

    async def record_pods():
        async for event in cluster.watch_pods(JOB):
            run.pod_events.append(event)
            if event.pod.rank == DRIVER_RANK and event.pod.phase.finished:
                return

    async def record_jobs():
        async for job in cluster.watch_jobs():
            if job.name == JOB:
                run.jobs.append(job)
                if job.phase.finished:
                    return

    recorders = [asyncio.create_task(record_pods()), asyncio.create_task(record_jobs())]
    try:
        async for batch in cluster.stream_logs(JOB):  # follows the replacement pods, ends with the job
            run.lines += batch
            if run.killed is None and any(line.step is not None and line.step >= KILL_AT_STEP for line in batch):
                run.killed = next(p for p in await cluster.list_pods(JOB) if p.rank == 1)
                await cluster.kill_pod(run.killed.name)
        run.final = await cluster.wait_job(JOB, frozenset({JobPhase.COMPLETE}), WAIT)
        run.final_pods = await cluster.list_pods(JOB)
        run.status = (await cluster.resources.get("RayJob", JOB))["status"]
        await asyncio.gather(*recorders)  # each ends once it has seen the end
    finally:
        for task in recorders:
            task.cancel()

    # delete: every pod of the job goes, and the job with them
    remaining = {p.name for p in run.final_pods}
    seen: set[str] = set()
    listed = asyncio.Event()
    deleted = asyncio.Event()

    async def watch_deletions():
        async for event in cluster.watch_pods(JOB):
            if event.type == PodEventType.DELETED:
                run.gone.add(event.pod.name)
            else:
                seen.add(event.pod.name)
            if seen >= remaining:
                listed.set()
            if deleted.is_set() and run.gone >= remaining:
                return

    watcher = asyncio.create_task(watch_deletions())
    try:
        await asyncio.wait_for(listed.wait(), WAIT)
        await cluster.delete("RayJob", JOB)
        deleted.set()
        await asyncio.wait_for(watcher, WAIT)
    finally:
        watcher.cancel()
    try:
        await cluster.get_job(JOB)
    except NotFound as exc:
        run.after_delete = exc
    run.listed_after_delete = await cluster.list_jobs()
    return run


@pytest.fixture(scope="module")
def ray_run():
    from backend.kube.cluster import KubeCluster
    from backend.settings import Settings

    async def main(kubeconfig: Path) -> Run:
        cluster = KubeCluster.from_settings(Settings(backend="kube", kubeconfig=kubeconfig, context="kfcockpit"))
        try:
            return await asyncio.wait_for(_run(cluster), 2 * WAIT)
        finally:
            await cluster.close()

    home = Path(tempfile.mkdtemp(prefix="kfr-", dir="/tmp"))
    try:
        with embedded_cluster(home) as (_, kubeconfig):
            yield asyncio.run(main(kubeconfig))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_rayjob_is_a_ray_job_of_the_kube_backend(ray_run):
    assert ray_run.applied == f"rayjob/{JOB} created"
    assert ray_run.first.launcher == "ray" and ray_run.first.phase in (JobPhase.CREATED, JobPhase.RUNNING)
    (listed,) = [j for j in ray_run.listed if j.name == JOB]
    assert (listed.launcher, listed.num_nodes, listed.max_restarts, listed.volumes) == ("ray", 2, 3, ["checkpoints"])


def test_its_status_is_kuberays(ray_run):
    status = ray_run.status
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["failed"], status["succeeded"]) == (
        "Complete", "SUCCEEDED", 1, 1)
    assert status["rayClusterName"] and status["startTime"] <= status["endTime"]


def test_driver_and_worker_pods_are_found_by_kuberays_labels(ray_run):
    cluster = ray_run.status["rayClusterName"]
    pods = {e.pod.name: e.pod for e in ray_run.pod_events}
    assert all(p.job == JOB and p.labels[RAY_LABEL_CLUSTER] == cluster for p in pods.values())
    (driver,) = [p for p in pods.values() if p.rank == DRIVER_RANK]
    assert driver.labels[RAY_LABEL_ORIGINATED_NAME] == JOB and driver.labels[RAY_LABEL_NODE_TYPE] == "head"
    workers = sorted((p.restart_attempt, p.rank) for p in pods.values() if p.rank != DRIVER_RANK)
    assert workers == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(pods[n].labels[RAY_LABEL_NODE_TYPE] == "worker" for n in pods if n != driver.name)
    # matched by both selectors (submitter and head at once), the driver is still added once
    added = [e.pod.name for e in ray_run.pod_events if e.type == PodEventType.ADDED]
    assert len(added) == len(set(added)) == 5


def test_worker_logs_carry_every_step_and_a_killed_worker_restarts_the_group(ray_run):
    steps = {line.step for line in ray_run.lines if line.step is not None}
    assert steps == set(range(1, STEPS + 1))
    assert all(line.pod.startswith(f"{JOB}-worker-{line.rank}-") for line in ray_run.lines if line.step is not None)
    killed = ray_run.killed
    assert killed is not None and (killed.rank, killed.restart_attempt) == (1, 0)
    # deleted with grace period 0, as kill_pod does on any cluster: the pod is gone, not kept Failed
    (last,) = [e for e in ray_run.pod_events if e.pod.name == killed.name][-1:]
    assert (last.type, last.pod.reason) == (PodEventType.DELETED, "Deleted")
    final = ray_run.final
    assert (final.phase, final.restart_attempt, final.launcher) == (JobPhase.COMPLETE, 1, "ray")
    phases = [(j.phase, j.restart_attempt) for j in ray_run.jobs]
    assert (JobPhase.RESTARTING, 1) in phases and phases[-1] == (JobPhase.COMPLETE, 1)
    assert all(p.phase.value == "Succeeded" for p in ray_run.final_pods)


def test_delete_removes_the_rayjob_and_its_pods(ray_run):
    assert ray_run.gone >= {p.name for p in ray_run.final_pods}
    assert str(ray_run.after_delete) == f"TrainJob {JOB}: not found in namespace default"
    assert JOB not in [j.name for j in ray_run.listed_after_delete]
