"""RayJobs on the embedded cluster with real Ray, through the kube backend as the cockpit drives
them: manifests/rayjob.yaml applied as is, its Ray Train workers shown as pods found by KubeRay's
labels, the job read from the status KubeRay v1.7.0 would write, a killed worker pod making Ray
restart the group from a checkpoint, delete taking every pod, and no Ray process left after the
job, after `cluster down`, after the controller dies.

Ray starts slowly on two cores, so one run (`lesson_run`, the lesson's job with a worker killed
mid-run, then deleted) serves most assertions; each of the other two tests starts one Ray more.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import tempfile
from contextlib import asynccontextmanager
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

import pytest

from backend.cluster import NotFound
from backend.kube.cluster import KubeCluster
from backend.local.embedded import Embedded
from backend.local.node.podspec import ENV_POD
from backend.processes import marked_processes, wait_gone_async
from backend.models import (
    DRIVER_RANK,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    JobPhase,
    JobSummary,
    LogLine,
    Pod,
    PodEvent,
    PodEventType,
    PodPhase,
    RAY_LABEL_CLUSTER,
    RAY_LABEL_NODE_TYPE,
    RAY_LABEL_ORIGINATED_NAME,
    RunMetrics,
    parse_manifests,
)
from tests.local.conftest import MANIFESTS, WAIT, embedded_cluster, wait_for_pods
from training.logfmt import parse_line

JOB = "lesson-ray"
KILL_AT_STEP = 12  # after the checkpoint of step 10 (the job checkpoints every 5)
# The whole of `lesson_run`: two Ray groups of 100 paced steps, then the delete. WAIT bounds each
# wait inside it; under CI load on two cores the run as a whole has taken more than one WAIT.
RUN_BUDGET = 3 * WAIT

# the module's tests have the run's budget, plus room for the cluster's start and stop
pytestmark = pytest.mark.timeout(RUN_BUDGET + 300)


def short_home() -> Path:
    # Short on purpose: Ray's socket paths under <home>/ray must stay within 107 bytes.
    return Path(tempfile.mkdtemp(prefix="kfr-", dir="/tmp"))


@asynccontextmanager
async def short_cluster() -> AsyncIterator[tuple[KubeCluster, Embedded]]:
    """The embedded cluster on a short state root of its own, removed after."""
    home = short_home()
    try:
        async with embedded_cluster(home) as cluster:
            yield cluster, Embedded(home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def driver_uid(cluster: KubeCluster, driver: str) -> str:
    return (await cluster.resources.get("Pod", driver))["metadata"]["uid"]


def ray_processes(uid: str) -> list[int]:
    """Live processes of a driver pod (by its uid, the node's marker): the driver, Ray's own
    processes, its workers."""
    return list(marked_processes({ENV_POD: uid}))


async def apply_lesson_rayjob(cluster: KubeCluster) -> str:
    results = []
    for name in ("volume.yaml", "rayjob.yaml"):
        for resource in parse_manifests((MANIFESTS / name).read_text()):
            results.append(await cluster.apply(resource))
    return results[-1]


async def ray_running(cluster: KubeCluster) -> tuple[str, list[int]]:
    """Apply the lesson's RayJob and wait (on the pod watch) for both its workers to run: its
    driver pod and every process marked with it then."""
    await apply_lesson_rayjob(cluster)
    pods = await asyncio.wait_for(wait_for_pods(cluster, JOB, lambda pods: sum(
        p.rank != DRIVER_RANK and p.phase == PodPhase.RUNNING for p in pods.values()) >= 2), WAIT)
    driver = await driver_uid(cluster, next(p for p in pods if p.rank == DRIVER_RANK).name)
    running = ray_processes(driver)
    assert len(running) > 5, "expected the driver, Ray's own processes and two workers"
    return driver, running


@dataclass
class LessonRun:
    cluster: KubeCluster
    home: Path
    applied: str = ""
    applied_again: str = ""
    pod_events: list[PodEvent] = field(default_factory=list)
    jobs: list[JobSummary] = field(default_factory=list)
    lines: list[LogLine] = field(default_factory=list)
    killed: Pod | None = None
    final: JobSummary | None = None
    final_pods: list[Pod] = field(default_factory=list)
    metrics: list[RunMetrics] = field(default_factory=list)
    left_running: list[int] = field(default_factory=list)
    first: JobSummary | None = None  # read right after the apply
    listed: list[JobSummary] = field(default_factory=list)
    status: dict = field(default_factory=dict)  # the RayJob's, as stored
    gone: set[str] = field(default_factory=set)  # pods the watch saw deleted after the RayJob was
    after_delete: Exception | None = None
    listed_after_delete: list[JobSummary] = field(default_factory=list)

    def driver(self) -> Pod:
        return next(p for p in self.final_pods if p.rank == DRIVER_RANK)

    def workers(self, attempt: int) -> dict[str, list[Pod]]:
        """Every state each worker pod of an attempt went through, by pod name."""
        seen: dict[str, list[Pod]] = defaultdict(list)
        for event in self.pod_events:
            if event.pod.rank != DRIVER_RANK and event.pod.restart_attempt == attempt:
                seen[event.pod.name].append(event.pod)
        return seen


    def progress(self) -> str:
        """How far the run got, for a run that did not end in time."""
        steps = [line.step for line in self.lines if line.step is not None]
        phases = [(j.phase.value, j.restart_attempt) for j in self.jobs if j.name == JOB]
        return (f"{len(self.lines)} log lines, newest step {max(steps, default=None)}, "
                f"killed {self.killed.name if self.killed else None}, job phases {phases[-5:]}, "
                f"finished {self.final is not None}, deleted pods {sorted(self.gone)}")


async def _lesson_run(run: LessonRun) -> None:
    cluster = run.cluster
    run.applied = await apply_lesson_rayjob(cluster)
    run.applied_again = await apply_lesson_rayjob(cluster)
    run.first = await cluster.get_job(JOB)
    run.listed = await cluster.list_jobs()

    async def record_pods():
        async for event in cluster.watch_pods(JOB):
            run.pod_events.append(event)
            if event.pod.rank == DRIVER_RANK and event.pod.phase.finished:
                return

    async def record_jobs():
        async for job in cluster.watch_jobs():
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
        run.metrics = await cluster.read_metrics("checkpoints")
        run.left_running = ray_processes(await driver_uid(cluster, run.driver().name))
        run.status = (await cluster.resources.get("RayJob", JOB))["status"]
        await asyncio.gather(*recorders)  # each ends once it has seen the end
    finally:
        for task in recorders:
            task.cancel()
    await _delete(run)


async def _delete(run: LessonRun) -> None:
    """Delete the RayJob while a pod watch is open: every pod of the job goes, and the job."""
    cluster = run.cluster
    remaining = {p.name for p in run.final_pods}
    seen: set[str] = set()
    # Set before the delete is sent, not after it returns: the pods' deletions may reach the
    # watch while the delete call is still returning (waiting for them then was the hang of the
    # first merged run, 0e5887d).
    listed, deleting = asyncio.Event(), asyncio.Event()

    async def watch_deletions():
        async for event in cluster.watch_pods(JOB):
            if event.type == PodEventType.DELETED:
                if deleting.is_set():
                    run.gone.add(event.pod.name)
            else:
                seen.add(event.pod.name)
            if seen >= remaining:
                listed.set()
            if deleting.is_set() and run.gone >= remaining:
                return

    watcher = asyncio.create_task(watch_deletions())
    try:
        await asyncio.wait_for(listed.wait(), WAIT)
        deleting.set()
        await cluster.delete("RayJob", JOB)
        await asyncio.wait_for(watcher, WAIT)
    finally:
        watcher.cancel()
    try:
        await cluster.get_job(JOB)
    except NotFound as exc:
        run.after_delete = exc
    run.listed_after_delete = await cluster.list_jobs()


@pytest.fixture(scope="module")
def lesson_run():
    home = short_home()

    async def main() -> LessonRun:
        async with embedded_cluster(home) as cluster:
            run = LessonRun(cluster, home)
            try:
                await asyncio.wait_for(_lesson_run(run), RUN_BUDGET)
            except TimeoutError:
                pytest.fail(f"the lesson RayJob did not run and go within {RUN_BUDGET:.0f} s: {run.progress()}",
                            pytrace=False)
            return run

    try:
        yield asyncio.run(main())
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_lesson_rayjob_applies_as_is_and_completes(lesson_run):
    assert lesson_run.applied == "rayjob/lesson-ray created"
    assert lesson_run.applied_again == "rayjob/lesson-ray unchanged"
    final = lesson_run.final
    assert final.phase == JobPhase.COMPLETE and final.launcher == "ray"
    assert (final.num_nodes, final.restart_attempt, final.max_restarts) == (2, 1, 3)
    assert final.volumes == ["checkpoints"]
    (metrics,) = lesson_run.metrics
    assert re.fullmatch(r"lesson-ray/ray-[0-9-]+-[0-9a-f]{4}", metrics.run)
    assert (metrics.launcher, metrics.steps, metrics.world_size, metrics.resumes) == ("ray", 100, 2, 1)


def test_two_worker_pods_run_beside_the_driver_with_identical_losses(lesson_run):
    first = lesson_run.workers(attempt=0)
    assert len(first) == 2
    for name, states in first.items():
        rank = states[0].rank
        assert re.fullmatch(rf"lesson-ray-worker-{rank}-[a-z0-9]{{5}}", name)
        assert states[0].labels[LABEL_RANK] == str(rank) and states[0].labels[LABEL_RESTART_ATTEMPT] == "0"
        assert PodPhase.RUNNING in {s.phase for s in states}
    driver = lesson_run.driver()
    assert re.fullmatch(r"lesson-ray-driver-[a-z0-9]{5}", driver.name)
    assert driver.labels[LABEL_RANK] == "driver" and driver.phase == PodPhase.SUCCEEDED and driver.exit_code == 0

    losses: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for line in lesson_run.lines:
        fields = parse_line(line.text)
        if "rank" in fields and "world" in fields:  # a worker's logfmt line: it sits in its pod
            assert line.rank == int(fields["rank"]) and line.pod.startswith(f"lesson-ray-worker-{line.rank}-"), line
        if line.pod == driver.name:
            assert line.rank == DRIVER_RANK and line.step is None, line
        if line.step is not None:
            losses[line.step][line.rank].add(fields["loss"])
    assert sorted(losses) == list(range(1, 101))
    for step, by_rank in losses.items():
        assert set(by_rank) == {0, 1}, step
        # all-reduced: both ranks print the same loss; steps redone after the restart print it again
        assert len(by_rank[0]) == 1 and by_rank[0] == by_rank[1], (step, by_rank)


def test_a_killed_worker_pod_makes_ray_restart_the_group_from_a_checkpoint(lesson_run):
    killed = lesson_run.killed
    assert killed is not None and killed.restart_attempt == 0 and killed.rank == 1
    first = lesson_run.workers(attempt=0)
    # kill_pod is a delete with grace period 0: the killed pod goes at once
    assert [e.type.value for e in lesson_run.pod_events if e.pod.name == killed.name][-1] == "DELETED"
    (peer,) = [name for name in first if name != killed.name]
    # Ray tore it down: Failed, its container terminated with reason Error (the API's word for it)
    assert any((p.phase, p.reason) == (PodPhase.FAILED, "Error") for p in first[peer]), first[peer]
    # ... before it started the next one: both old pods ended before a new one appeared
    order = [(e.pod.name, e.pod.phase, e.type.value) for e in lesson_run.pod_events]
    first_new = next(i for i, e in enumerate(lesson_run.pod_events) if e.pod.restart_attempt == 1
                     and e.pod.rank != DRIVER_RANK)
    for name, ended in ((killed.name, lambda phase, kind: kind == "DELETED"),
                        (peer, lambda phase, kind: phase == PodPhase.FAILED)):
        assert any(n == name and ended(phase, kind) for n, phase, kind in order[:first_new]), name
    deleted = {e.pod.name for e in lesson_run.pod_events if e.type.value == "DELETED"}
    assert set(first) <= deleted  # replaced, as a TrainJob's group is

    second = lesson_run.workers(attempt=1)
    assert sorted(states[0].rank for states in second.values()) == [0, 1]
    assert not set(second) & set(first)
    final_workers = [p for p in lesson_run.final_pods if p.rank != DRIVER_RANK]
    assert sorted(p.name for p in final_workers) == sorted(second)
    assert all(p.phase == PodPhase.SUCCEEDED for p in final_workers)
    last_steps = {line.pod: line.step for line in lesson_run.lines if line.step is not None}
    assert [last_steps[p.name] for p in final_workers] == [100, 100]
    assert lesson_run.driver().restart_attempt == 1  # the driver drives the current group

    phases = [(j.phase, j.restart_attempt) for j in lesson_run.jobs if j.name == JOB]
    assert (JobPhase.RESTARTING, 0) in phases and (JobPhase.RUNNING, 1) in phases
    assert phases.index((JobPhase.RESTARTING, 0)) < phases.index((JobPhase.RUNNING, 1))

    resumed = [(line.pod, int(parse_line(line.text)["from_step"])) for line in lesson_run.lines
               if "event=resumed" in line.text]
    assert sorted(pod for pod, _ in resumed) == sorted(second)
    (from_step,) = {step for _, step in resumed}
    # the survivors' save of the step the kill interrupted (at least the kill step), or a periodic
    # checkpoint when the survivor was torn down first
    assert from_step >= KILL_AT_STEP or (from_step > 0 and from_step % 5 == 0), from_step


def test_no_ray_process_is_left_after_the_job_and_its_files_stay_under_the_state_root(lesson_run):
    assert lesson_run.left_running == []
    home = lesson_run.home
    assert list((home / "ray").glob("session_*/logs")), "Ray's session is not under the state root"
    started = next(parse_line(line.text) for line in lesson_run.lines if "event=ray_started" in line.text)
    assert started["temp_dir"] == str(home / "ray") and started["node"] == "127.0.0.1"


def test_the_rayjob_is_a_ray_job_of_the_kube_backend(lesson_run):
    assert lesson_run.first.launcher == "ray" and lesson_run.first.phase in (JobPhase.CREATED, JobPhase.RUNNING)
    (listed,) = [j for j in lesson_run.listed if j.name == JOB]
    assert (listed.launcher, listed.num_nodes, listed.max_restarts, listed.volumes) == ("ray", 2, 3, ["checkpoints"])


def test_its_status_is_kuberays(lesson_run):
    """What the kube backend reads on any cluster with KubeRay v1.7.0 (apis/ray/v1/rayjob_types.go)."""
    status = lesson_run.status
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["failed"], status["succeeded"]) == (
        "Complete", "SUCCEEDED", 1, 1)
    assert status["rayClusterName"] and status["startTime"] <= status["endTime"]


def test_driver_and_worker_pods_are_found_by_kuberays_labels(lesson_run):
    """KubeRay's pod labels (ray-operator/controllers/ray/common/pod.go labelPod)."""
    cluster = lesson_run.status["rayClusterName"]
    pods = {e.pod.name: e.pod for e in lesson_run.pod_events}
    assert all(p.job == JOB and p.labels[RAY_LABEL_CLUSTER] == cluster for p in pods.values())
    (driver,) = [p for p in pods.values() if p.rank == DRIVER_RANK]
    assert driver.labels[RAY_LABEL_ORIGINATED_NAME] == JOB and driver.labels[RAY_LABEL_NODE_TYPE] == "head"
    workers = sorted((p.restart_attempt, p.rank) for p in pods.values() if p.rank != DRIVER_RANK)
    assert workers == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(pods[n].labels[RAY_LABEL_NODE_TYPE] == "worker" for n in pods if n != driver.name)
    # matched by both selectors (submitter and head at once), the driver is still added once
    added = [e.pod.name for e in lesson_run.pod_events if e.type == PodEventType.ADDED]
    assert len(added) == len(set(added)) == 5


def test_worker_logs_carry_every_step_and_the_killed_pod_is_deleted_not_kept_failed(lesson_run):
    steps = {line.step for line in lesson_run.lines if line.step is not None}
    assert steps == set(range(1, 101))
    assert all(line.pod.startswith(f"{JOB}-worker-{line.rank}-") for line in lesson_run.lines if line.step is not None)
    killed = lesson_run.killed
    assert killed is not None and (killed.rank, killed.restart_attempt) == (1, 0)
    # deleted with grace period 0, as kill_pod does on any cluster: the pod is gone, not kept Failed
    (last,) = [e for e in lesson_run.pod_events if e.pod.name == killed.name][-1:]
    assert (last.type, last.pod.reason) == (PodEventType.DELETED, "Deleted")
    final = lesson_run.final
    assert (final.phase, final.restart_attempt, final.launcher) == (JobPhase.COMPLETE, 1, "ray")
    phases = [(j.phase, j.restart_attempt) for j in lesson_run.jobs if j.name == JOB]
    assert (JobPhase.RESTARTING, 1) in phases and phases[-1] == (JobPhase.COMPLETE, 1)
    assert all(p.phase == PodPhase.SUCCEEDED for p in lesson_run.final_pods)


def test_delete_removes_the_rayjob_and_its_pods(lesson_run):
    assert lesson_run.gone >= {p.name for p in lesson_run.final_pods}
    assert str(lesson_run.after_delete) == f"TrainJob {JOB}: not found in namespace default"
    assert JOB not in [j.name for j in lesson_run.listed_after_delete]


async def test_cluster_down_mid_run_leaves_no_ray_process_and_the_job_ends_lost():
    async with short_cluster() as (cluster, embedded):
        driver, running = await ray_running(cluster)
        assert await embedded.down() is not None
        assert await wait_gone_async(running, WAIT) == []
        assert ray_processes(driver) == []
        await embedded.up()  # a RayJob does not survive its driver: not run again, Failed
        job = await cluster.get_job(JOB)
        assert (job.phase, job.reason) == (JobPhase.FAILED, "AppFailed")  # KubeRay's reason; ours (DriverLost) is told:
        assert job.message.endswith("exited with code 137: its processes were lost when the node's kubelet stopped")
        assert all(p.phase == PodPhase.FAILED for p in await cluster.list_pods(JOB))


async def test_a_dead_controller_takes_every_ray_process_with_it():
    async with short_cluster() as (cluster, embedded):
        driver, running = await ray_running(cluster)
        os.kill(embedded.client.controller_pid(), signal.SIGKILL)
        # the driver dies with it (PR_SET_PDEATHSIG: SIGTERM, Ray shut down), Ray's processes with it
        assert await wait_gone_async(running, WAIT) == []
        with pytest.raises(NotFound):
            await cluster.delete("TrainJob", JOB)  # a new controller answers: the name is a RayJob's
        job = await cluster.get_job(JOB)
        assert (job.phase, job.reason) == (JobPhase.FAILED, "AppFailed")  # KubeRay's reason; ours (DriverLost) is told:
        assert job.message.endswith("exited with code 137: its processes were lost when the node's kubelet stopped")
        await cluster.delete("RayJob", JOB)
        assert await cluster.list_jobs() == []
