"""A hang to practise on, end to end on the embedded cluster: rank 1's pod frozen mid-training
(every process stopped, the pod still Running, as a frozen machine leaves it), rank 0 says it
waits, `kfcockpit goodput` reports the hang (rank, step, seconds; exit 1); thawed, the group goes on
and the job completes. Bad input: an unknown pod, a pod that is not running."""

from __future__ import annotations

import asyncio

import pytest

from backend.errors import ClusterError, NotFound
from backend.goodput.job import measure_job
from backend.hangs import HangRule
from backend.models import JobPhase, PodPhase
from tests.local.conftest import WAIT, apply_all, cli, lesson_job, lesson_resources, run_until_step

COMPLETE = frozenset({JobPhase.COMPLETE})


async def _rank_0_waits(cluster, job: str) -> None:
    """Rank 0's heartbeat: its step overran and it says it waits (training/heartbeat.py)."""
    async for batch in cluster.stream_logs(job):
        if any(line.rank == 0 and "event=waiting" in line.text for line in batch):
            return


async def _running_pods(cluster, job: str) -> dict[int, str]:
    async for event in cluster.watch_pods(job):
        pods = {p.rank: p.name for p in await cluster.list_pods(job) if p.phase == PodPhase.RUNNING}
        if len(pods) == 2 and event.pod.phase == PodPhase.RUNNING:
            return pods
    raise AssertionError("the pod watch ended")


async def test_a_frozen_rank_is_reported_as_a_hang_and_thawed_the_job_completes(cluster, home):
    await apply_all(cluster, *lesson_resources())
    job = lesson_job("frozen", steps=200, step_delay=0.02)
    # Half a CPU each: `kfcockpit goodput` reads the run's record through a reader pod (50m), which
    # two whole-CPU workers leave no room for on a two-core machine's one node.
    job.spec.trainer.resources_per_node.requests["cpu"] = "500m"
    await cluster.apply(job)
    pods = await asyncio.wait_for(_running_pods(cluster, "frozen"), WAIT)
    await asyncio.wait_for(run_until_step(cluster, "frozen", 5), WAIT)

    await cluster.freeze_pod(pods[1], True)
    await asyncio.wait_for(_rank_0_waits(cluster, "frozen"), WAIT)
    measured = await measure_job(cluster, "frozen", HangRule(multiple=10, floor=1))
    hang = measured.hang
    assert hang is not None and hang.stopped == (1,) and hang.waiting == (0,), hang
    assert hang.running == (0, 1)  # both pods Running, as kubectl shows them
    done = await asyncio.to_thread(cli, home, "goodput", "frozen", "--hang-floor", "1")
    assert done.returncode == 1 and "hang: rank 1 stopped after step" in done.stdout, done.stdout + done.stderr

    await cluster.freeze_pod(pods[1], False)
    finished = await cluster.wait_job("frozen", COMPLETE, WAIT)
    assert finished.phase == JobPhase.COMPLETE and finished.restart_attempt == 0  # no restart: it went on


async def test_freezing_an_unknown_or_finished_pod_says_so_in_one_line(cluster, home):
    with pytest.raises(NotFound, match="pod nosuch not found"):
        await cluster.freeze_pod("nosuch", True)
    done = await asyncio.to_thread(cli, home, "pod", "freeze", "nosuch")
    assert done.returncode != 0 and done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    await apply_all(cluster, *lesson_resources())
    quick = lesson_job("quick", steps=2)
    await cluster.apply(quick)
    await cluster.wait_job("quick", COMPLETE, WAIT)
    (pod, *_) = [p.name for p in await cluster.list_pods("quick")]
    with pytest.raises(ClusterError, match="is Succeeded, not running"):
        await cluster.freeze_pod(pod, True)
