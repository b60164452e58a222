"""The lesson's RayJob (manifests/rayjob.yaml applied as is) on the embedded cluster with real Ray,
through the kube backend as the cockpit drives it, and the cluster ended under it: no Ray process
left after `cluster down`, after the controller dies, and the job then Failed as KubeRay says.

A RayJob's life (its workers as pods found by KubeRay's labels, its status, a killed worker pod
restarting the group, the delete) is read from the comparison's run in tests/ray/test_rayjob_life.py:
Ray starts slowly on two cores, and a run of its own here cost about a minute of CPU.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import pytest

from backend.cluster import NotFound
from backend.kube.cluster import KubeCluster
from backend.local.embedded import Embedded
from backend.processes import wait_gone_async
from backend.models import DRIVER_RANK, JobPhase, PodPhase, parse_manifests
from tests.local.conftest import MANIFESTS, WAIT, embedded_cluster, wait_for_pods
from tests.ray.rayjob_record import driver_processes, driver_uid

JOB = "lesson-ray"

# each wait is bounded by WAIT; room besides for the cluster's start and stop
pytestmark = pytest.mark.timeout(2 * WAIT + 300)


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


async def apply_lesson_rayjob(cluster: KubeCluster) -> str:
    results = []
    for name in ("volume.yaml", "rayjob.yaml"):
        for resource in parse_manifests((MANIFESTS / name).read_text()):
            results.append(await cluster.apply(resource))
    return results[-1]


async def ray_running(cluster: KubeCluster) -> tuple[str, list[int]]:
    """Apply the lesson's RayJob as is, twice (the second apply changes nothing), and wait (on the
    pod watch) for both its workers to run: its driver pod and every process marked with it then."""
    assert await apply_lesson_rayjob(cluster) == "rayjob/lesson-ray created"
    first = await cluster.get_job(JOB)
    assert first.launcher == "ray" and first.phase in (JobPhase.CREATED, JobPhase.RUNNING)
    (listed,) = [j for j in await cluster.list_jobs() if j.name == JOB]
    assert (listed.launcher, listed.num_nodes, listed.max_restarts, listed.volumes) == ("ray", 2, 3, ["checkpoints"])
    assert await apply_lesson_rayjob(cluster) == "rayjob/lesson-ray unchanged"
    pods = await asyncio.wait_for(wait_for_pods(cluster, JOB, lambda pods: sum(
        p.rank != DRIVER_RANK and p.phase == PodPhase.RUNNING for p in pods.values()) >= 2), WAIT)
    driver = await driver_uid(cluster, next(p for p in pods if p.rank == DRIVER_RANK).name)
    running = driver_processes(driver)
    assert len(running) > 5, "expected the driver, Ray's own processes and two workers"
    return driver, running


async def test_cluster_down_mid_run_leaves_no_ray_process_and_the_job_ends_lost():
    async with short_cluster() as (cluster, embedded):
        driver, running = await ray_running(cluster)
        assert await embedded.down() is not None
        assert await wait_gone_async(running, WAIT) == []
        assert driver_processes(driver) == []
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
