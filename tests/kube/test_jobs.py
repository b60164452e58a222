"""Job state on Kubernetes: from the TrainJob's conditions plus its JobSet's restarts, watched
(not polled), reported once per change of phase or restart attempt; wait_job on top of it."""

from __future__ import annotations

import asyncio

import pytest

from backend.cluster import NotFound, Timeout
from backend.models import JobPhase
from tests.kube.conftest import take
from tests.kube.objects import JOBSETS, TRAINJOBS, condition, job_set, train_job

JOB = "lesson-ddp"


def add_condition(kind: str, reason: str = "", message: str = ""):
    def change(job: dict) -> None:
        job.setdefault("status", {}).setdefault("conditions", []).append(condition(kind, reason, message))
    return change


def jobset_status(restarts: int, ready: int):
    def change(jobset: dict) -> None:
        jobset["status"] = job_set(JOB, restarts=restarts, ready=ready)["status"]
    return change


async def test_job_phases_follow_conditions_and_group_restarts(api, cluster):
    api.put(TRAINJOBS, train_job(JOB))
    api.put(JOBSETS, job_set(JOB, ready=0))
    summaries = cluster.watch_jobs()
    try:
        (created,) = await take(summaries, 1)
        assert (created.name, created.phase, created.num_nodes, created.max_restarts, created.volumes) == (
            JOB, JobPhase.CREATED, 2, 3, ["checkpoints"])

        api.update(JOBSETS, JOB, jobset_status(restarts=0, ready=1))
        assert [s.phase for s in await take(summaries, 1)] == [JobPhase.RUNNING]

        api.update(JOBSETS, JOB, jobset_status(restarts=1, ready=0))  # a worker died: group recreated
        (restarting,) = await take(summaries, 1)
        assert (restarting.phase, restarting.restart_attempt) == (JobPhase.RESTARTING, 1)

        api.update(JOBSETS, JOB, jobset_status(restarts=1, ready=1))
        (again,) = await take(summaries, 1)
        assert (again.phase, again.restart_attempt) == (JobPhase.RUNNING, 1)

        api.update(TRAINJOBS, JOB, lambda job: job["metadata"].setdefault("labels", {}).update(seen="yes"))
        api.update(TRAINJOBS, JOB, add_condition("Complete", "JobSetCompleted", "jobset completed"))
        (done,) = await take(summaries, 1)  # the label change alone was not a new summary
        assert (done.phase, done.reason, done.restart_attempt) == (JobPhase.COMPLETE, "JobSetCompleted", 1)
        assert done.finished is not None and [c.type for c in done.conditions] == ["Complete"]
    finally:
        await summaries.aclose()
    assert (await cluster.get_job(JOB)).phase == JobPhase.COMPLETE


async def test_failed_job_and_listing(api, cluster):
    api.put(TRAINJOBS, train_job(JOB))
    api.put(TRAINJOBS, train_job("second", num_nodes=1))
    api.put(JOBSETS, job_set(JOB, restarts=3, ready=0))
    api.update(TRAINJOBS, JOB, add_condition("Failed", "JobSetFailed", "jobset failed: reached maxRestarts"))
    jobs = {s.name: s for s in await cluster.list_jobs()}
    assert jobs[JOB].phase == JobPhase.FAILED and jobs[JOB].message == "jobset failed: reached maxRestarts"
    assert (jobs["second"].phase, jobs["second"].num_nodes) == (JobPhase.CREATED, 1)
    with pytest.raises(NotFound, match="TrainJob nope: not found in namespace default"):
        await cluster.get_job("nope")


async def test_wait_job_returns_on_the_phase_and_times_out_otherwise(api, cluster):
    api.put(TRAINJOBS, train_job(JOB))
    api.put(JOBSETS, job_set(JOB, ready=0))
    waiting = asyncio.create_task(cluster.wait_job(JOB, frozenset({JobPhase.RUNNING}), timeout=30))
    await asyncio.to_thread(api.wait_watching, JOBSETS)
    api.update(JOBSETS, JOB, jobset_status(restarts=0, ready=1))
    assert (await waiting).phase == JobPhase.RUNNING

    with pytest.raises(Timeout, match="still Running after 0s"):
        await cluster.wait_job(JOB, frozenset({JobPhase.COMPLETE}), timeout=0.2)
