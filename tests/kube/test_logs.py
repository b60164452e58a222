"""A job's logs on Kubernetes: every worker's log from its first line, merged, in batches; the
stream picks up the replacement pods of a restarted group (as stern does), survives dropped log
streams without losing or repeating a line, and ends when the job has finished. kill_pod
deletes exactly the named pod with grace period 0."""

from __future__ import annotations

import time

import pytest

from backend.cluster import NotFound
from tests.kube.conftest import HANG_GUARD
from tests.kube.objects import (
    JOBSETS,
    PODS,
    TRAINJOBS,
    condition,
    job_set,
    set_phase,
    train_job,
    worker_pod,
)

JOB = "lesson-ddp"
P0, P1 = f"{JOB}-node-0-0-a0", f"{JOB}-node-0-1-a0"
P0_NEW, P1_NEW = f"{JOB}-node-0-0-a1", f"{JOB}-node-0-1-a1"


async def collect(stream, count: int) -> list:
    """Lines from the stream until `count` more have arrived."""
    import asyncio

    lines: list = []
    async with asyncio.timeout(HANG_GUARD):
        while len(lines) < count:
            batch = await anext(stream)
            assert batch, "batches are never empty"
            lines += batch
    assert len(lines) == count, [line.text for line in lines]
    return lines


def texts(lines) -> list[tuple[str, str]]:
    return [(line.pod, line.text) for line in lines]


def running_job(api) -> None:
    api.put(TRAINJOBS, train_job(JOB))
    api.put(JOBSETS, job_set(JOB, ready=1))
    api.put(PODS, worker_pod(JOB, 0, phase="Running"))
    api.put(PODS, worker_pod(JOB, 1, phase="Running"))


async def test_logs_follow_replacement_pods_and_survive_dropped_streams(api, cluster):
    running_job(api)
    api.append_log(P0, "event=start rank=0 world=2")  # printed before anyone followed
    stream = cluster.stream_logs(JOB)
    try:
        first = await collect(stream, 1)
        assert texts(first) == [(P0, "event=start rank=0 world=2")]
        api.append_log(P0, "step=1 loss=0.900000 rank=0 world=2")
        api.append_log(P1, "step=1 loss=0.900000 rank=1 world=2")
        steps = await collect(stream, 2)
        assert sorted(texts(steps)) == [(P0, "step=1 loss=0.900000 rank=0 world=2"),
                                        (P1, "step=1 loss=0.900000 rank=1 world=2")]
        assert {(line.rank, line.step, line.loss) for line in steps} == {(0, 1, 0.9), (1, 1, 0.9)}
        assert all(abs(line.time - time.time()) < 60 for line in steps)  # the API server's timestamps

        # The learner kills worker 0; JobSet recreates the whole group (restart attempt 1).
        await cluster.kill_pod(P0)
        (delete,) = api.requests_for("DELETE", "/pods/")
        assert delete.path == f"/api/v1/namespaces/default/pods/{P0}"
        assert delete.query["gracePeriodSeconds"] == "0" and delete.body["gracePeriodSeconds"] == 0
        api.remove(PODS, P1)
        api.put(JOBSETS, job_set(JOB, restarts=1, ready=0))
        api.put(PODS, worker_pod(JOB, 0, attempt=1))
        api.put(PODS, worker_pod(JOB, 1, attempt=1))
        api.update(PODS, P0_NEW, set_phase("Running"))
        api.update(PODS, P1_NEW, set_phase("Running"))
        for pod, rank in ((P0_NEW, 0), (P1_NEW, 1)):
            api.append_log(pod, "resumed from checkpoint step=1", f"step=2 loss=0.800000 rank={rank} world=2")
        resumed = await collect(stream, 4)
        assert sorted(texts(resumed)) == sorted(
            [(P0_NEW, "resumed from checkpoint step=1"), (P0_NEW, "step=2 loss=0.800000 rank=0 world=2"),
             (P1_NEW, "resumed from checkpoint step=1"), (P1_NEW, "step=2 loss=0.800000 rank=1 world=2")])

        # Log streams break mid-way: the followers reopen them and skip what they delivered.
        api.drop_streams()
        api.append_log(P0_NEW, "step=3 loss=0.700000 rank=0 world=2")
        api.append_log(P1_NEW, "step=3 loss=0.700000 rank=1 world=2")
        after_drop = await collect(stream, 2)
        assert sorted(texts(after_drop)) == [(P0_NEW, "step=3 loss=0.700000 rank=0 world=2"),
                                             (P1_NEW, "step=3 loss=0.700000 rank=1 world=2")]

        # The job completes: the last lines arrive and the stream ends by itself.
        for pod in (P0_NEW, P1_NEW):
            api.append_log(pod, "event=done")
            api.update(PODS, pod, set_phase("Succeeded"))
            api.close_log(pod)
        api.update(TRAINJOBS, JOB, lambda job: job.setdefault("status", {}).setdefault(
            "conditions", []).append(condition("Complete", "JobSetCompleted")))
        rest = []
        async for batch in stream:
            rest += batch
        assert sorted(texts(rest)) == [(P0_NEW, "event=done"), (P1_NEW, "event=done")]
    finally:
        await stream.aclose()


async def test_a_container_restarted_in_place_is_followed_from_its_first_line(api, cluster):
    running_job(api)
    api.append_log(P0, "first container")
    stream = cluster.stream_logs(JOB)
    try:
        assert texts(await collect(stream, 1)) == [(P0, "first container")]
        api.restart_container(P0)
        api.append_log(P0, "second container, line 1", "second container, line 2")
        assert texts(await collect(stream, 2)) == [(P0, "second container, line 1"),
                                                   (P0, "second container, line 2")]
    finally:
        await stream.aclose()


async def test_a_follow_that_ended_before_the_containers_last_lines_is_read_to_its_end(api, cluster):
    """The stream ends cleanly and the container has ended meanwhile: what it printed between is
    read once more, never lost (seen on a busy machine: a job finished with its steps at 3 of 30)."""
    running_job(api)
    api.append_log(P0, "step=1 rank=0")
    stream = cluster.stream_logs(JOB)
    try:
        assert texts(await collect(stream, 1)) == [(P0, "step=1 rank=0")]
        api.update(PODS, P0, set_phase("Succeeded"))
        api.end_with_lines_unsent(P0, "step=2 rank=0", "event=done")
        assert texts(await collect(stream, 2)) == [(P0, "step=2 rank=0"), (P0, "event=done")]
    finally:
        await stream.aclose()


async def test_whole_logs_are_merged_by_time(api, cluster):
    running_job(api)
    api.append_log(P0, "a")
    api.append_log(P1, "b")
    api.append_log(P0, "c")
    lines = [line async for batch in cluster.stream_logs(JOB, follow=False) for line in batch]
    assert [line.text for line in lines] == ["a", "b", "c"]
    assert [line.pod for line in lines] == [P0, P1, P0]


async def test_a_finished_job_followed_is_merged_by_time_not_pod_after_pod(api, cluster):
    """Its pods' whole logs arrive in one read each: they are merged, not handed on as they come."""
    running_job(api)
    for pod, text in ((P0, "step=1 rank=0"), (P1, "step=1 rank=1"), (P0, "step=2 rank=0"), (P1, "step=2 rank=1")):
        api.append_log(pod, text)
    for pod in (P0, P1):
        api.update(PODS, pod, set_phase("Succeeded"))
        api.close_log(pod)
    api.update(TRAINJOBS, JOB, lambda job: job.setdefault("status", {}).setdefault(
        "conditions", []).append(condition("Complete", "JobSetCompleted")))
    lines = [line async for batch in cluster.stream_logs(JOB, follow=True) for line in batch]
    assert [line.text for line in lines] == ["step=1 rank=0", "step=1 rank=1", "step=2 rank=0", "step=2 rank=1"]


async def test_logs_and_kill_of_unknown_names_are_not_found(api, cluster):
    with pytest.raises(NotFound, match="TrainJob nope"):
        async for _ in cluster.stream_logs("nope"):
            pass
    with pytest.raises(NotFound, match="pod nope not found in namespace default"):
        await cluster.kill_pod("nope")


def log_requests(api, pod: str) -> list:
    return api.requests_for("GET", f"/pods/{pod}/log")


async def test_a_focused_stream_reads_the_ranks_wanted_and_a_rank_wanted_later_from_its_last_lines(api, cluster):
    """A 512-rank job followed with the cost of a few: a connection per rank a person looks at
    (rank 0, the one drilled into), while every pod's state comes from the one pod watch."""
    from backend.models import LogFocus

    api.put(TRAINJOBS, train_job(JOB))
    ranks = range(4)
    names = {rank: f"{JOB}-node-0-{rank}-a0" for rank in ranks}
    for rank in ranks:
        api.put(PODS, worker_pod(JOB, rank, phase="Running"))
        api.append_log(names[rank], *(f"step={s} loss=0.5 rank={rank} world=4" for s in range(1, 6)))
    focus = LogFocus([0], tail=2)
    stream = cluster.stream_logs(JOB, focus=focus)
    try:
        assert [(line.rank, line.step) for line in await collect(stream, 5)] == [(0, s) for s in range(1, 6)]
        assert log_requests(api, names[1]) == log_requests(api, names[2]) == log_requests(api, names[3]) == []

        # Rank 2 drilled into: its last two lines, then what it prints; rank 1 stays unread.
        focus.want([0, 2])
        assert texts(await collect(stream, 2)) == [(names[2], "step=4 loss=0.5 rank=2 world=4"),
                                                   (names[2], "step=5 loss=0.5 rank=2 world=4")]
        (request,) = log_requests(api, names[2])
        assert request.query["tailLines"] == "2"
        for rank in ranks:
            api.append_log(names[rank], f"step=6 loss=0.5 rank={rank} world=4")
        assert sorted(texts(await collect(stream, 2))) == [(names[0], "step=6 loss=0.5 rank=0 world=4"),
                                                           (names[2], "step=6 loss=0.5 rank=2 world=4")]

        # Let go, then wanted again: its last lines past what it already showed, none twice.
        focus.want([0])
        api.append_log(names[0], "step=7 loss=0.5 rank=0 world=4")
        assert texts(await collect(stream, 1)) == [(names[0], "step=7 loss=0.5 rank=0 world=4")]
        api.append_log(names[2], "step=7 loss=0.5 rank=2 world=4")  # printed while nobody reads it
        focus.want([2, 0])
        assert texts(await collect(stream, 1)) == [(names[2], "step=7 loss=0.5 rank=2 world=4")]
        assert len(log_requests(api, names[2])) == 2 and log_requests(api, names[1]) == []

        # A dropped stream reopens from its newest line (sinceSeconds: the client has no sinceTime).
        api.drop_streams()
        api.append_log(names[0], "step=8 loss=0.5 rank=0 world=4")
        assert texts(await collect(stream, 1)) == [(names[0], "step=8 loss=0.5 rank=0 world=4")]
        assert "sinceSeconds" in log_requests(api, names[0])[-1].query
    finally:
        await stream.aclose()


async def test_a_focused_stream_of_a_finished_job_reads_a_rank_wanted_after_the_end(api, cluster):
    """A finished 512-rank job: rank 0's log, then the failed rank's last lines when asked."""
    from backend.models import LogFocus

    running_job(api)
    api.append_log(P0, "step=1 loss=0.5 rank=0 world=2", "event=checkpoint_saved reason=peer_failure step=1")
    api.append_log(P1, "step=1 loss=0.5 rank=1 world=2", "Traceback (most recent call last):", "RuntimeError: boom")
    for pod, phase in ((P0, "Succeeded"), (P1, "Failed")):
        api.update(PODS, pod, set_phase(phase))
        api.close_log(pod)
    api.update(TRAINJOBS, JOB, lambda job: job.setdefault("status", {}).setdefault(
        "conditions", []).append(condition("Failed", "JobSetFailed")))
    focus = LogFocus([0], tail=2)
    stream = cluster.stream_logs(JOB, focus=focus)
    try:
        assert [line.pod for line in await collect(stream, 2)] == [P0, P0]
        focus.want([0, 1])
        assert texts(await collect(stream, 2)) == [(P1, "Traceback (most recent call last):"),
                                                   (P1, "RuntimeError: boom")]
    finally:
        await stream.aclose()


async def test_the_last_lines_of_ranks_not_followed_are_read_once_from_their_newest_pods(api, cluster):
    """A hung 512-rank group: what the ranks nobody follows said last tells which one stopped."""
    api.put(TRAINJOBS, train_job(JOB))
    for rank, attempt, phase in ((0, 1, "Running"), (1, 1, "Running"), (2, 0, "Failed"), (2, 1, "Running"),
                                 (3, 1, "Pending")):
        api.put(PODS, worker_pod(JOB, rank, attempt=attempt, phase=phase))
        api.append_log(f"{JOB}-node-0-{rank}-a{attempt}", *(f"step={s} rank={rank}" for s in range(1, 4)))
    lines = await cluster.last_lines(JOB, [1, 2, 3], count=2)
    assert texts(lines) == [(f"{JOB}-node-0-1-a1", "step=2 rank=1"), (f"{JOB}-node-0-1-a1", "step=3 rank=1"),
                            (f"{JOB}-node-0-2-a1", "step=2 rank=2"), (f"{JOB}-node-0-2-a1", "step=3 rank=2")]
    read = api.requests_for("GET", "/log")
    assert len(read) == 2 and all(r.query["tailLines"] == "2" and r.query["follow"] == "False" for r in read)
