"""TrainJobs on the embedded cluster, in real processes: the lesson job as is, a killed worker's
group coming back from its checkpoint with bitwise the same result, restarts running out."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
import yaml

from backend.local.registry.strategies.pods import WARM_ANNOTATION
from backend.local.embedded import Embedded
from backend.models import (
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    JobPhase,
    PodEventType,
    PodPhase,
    parse_manifests,
)
from tests.local.conftest import MANIFESTS, WAIT, apply_all, kubectl, lesson_job, lesson_resources, wait_for_pods
from training.logfmt import parse_line

COMPLETE = frozenset({JobPhase.COMPLETE})


def _metrics(home, run: str) -> dict:
    return json.loads((Embedded(home).layout.claim_dir("default", "checkpoints") / run / "metrics.json").read_text())


async def test_the_lesson_job_runs_as_is_two_pods_running_then_complete(cluster):
    await apply_all(cluster, *lesson_resources())
    (job,) = parse_manifests((MANIFESTS / "trainjob.yaml").read_text())
    assert await cluster.apply(job) == "trainjob/lesson-ddp created"
    assert await cluster.apply(job) == "trainjob/lesson-ddp unchanged"

    running = await asyncio.wait_for(wait_for_pods(
        cluster, "lesson-ddp", lambda pods: len(pods) == 2 and all(p.phase == PodPhase.RUNNING for p in pods.values())),
        WAIT)
    for rank, pod in enumerate(running):
        assert re.fullmatch(rf"lesson-ddp-node-0-{rank}-[a-z0-9]{{5}}", pod.name)
        assert pod.labels[LABEL_RANK] == str(rank) and pod.labels[LABEL_RESTART_ATTEMPT] == "0"
    # The lesson's cluster has two nodes and its volume is ReadWriteMany: LeastAllocated puts the
    # second worker on the node the first left free.
    assert {p.node for p in running} == {"kfcockpit-worker", "kfcockpit-worker2"}

    done = await cluster.wait_job("lesson-ddp", COMPLETE, WAIT)
    assert done.phase == JobPhase.COMPLETE and done.restart_attempt == 0
    pods = await cluster.list_pods("lesson-ddp")
    assert [p.name for p in pods] == [p.name for p in running]
    assert all(p.phase == PodPhase.SUCCEEDED and p.exit_code == 0 for p in pods)
    last = {}  # pod -> its last (step, loss), from its log (a listed pod carries none)
    async for batch in cluster.stream_logs("lesson-ddp", follow=False):
        last.update({line.pod: (line.step, line.loss) for line in batch if line.step is not None})
    assert last[pods[0].name] == last[pods[1].name]  # all-reduced: every rank prints the same loss
    assert last[pods[0].name][0] == 100
    (metrics,) = await cluster.read_metrics("checkpoints")
    assert (metrics.run, metrics.steps, metrics.world_size) == ("lesson-ddp", 100, 2)
    checkpoints = await cluster.checkpoints("checkpoints")
    assert checkpoints and all(c.valid and c.run == "lesson-ddp" for c in checkpoints)
    assert checkpoints[-1].step == 100


@pytest.mark.parametrize("launch", ["warm", "exec"])
async def test_a_killed_worker_restarts_the_group_which_resumes_and_ends_bitwise_equal(cluster, home, launch):
    await apply_all(cluster, *lesson_resources())
    plan = dict(steps=40, step_delay=0.05)
    annotations = {WARM_ANNOTATION: "false"} if launch == "exec" else None  # exec: torchrun in every pod
    await cluster.apply(lesson_job("straight", ckpt_dir="/checkpoints/straight", **plan))
    await cluster.apply(lesson_job("killed", ckpt_dir="/checkpoints/killed", annotations=annotations, **plan))

    events = []

    async def record():
        async for event in cluster.watch_pods("killed"):
            events.append(event)

    recorder = asyncio.create_task(record())
    lines, victim = [], None
    async for batch in cluster.stream_logs("killed"):  # follows the replacement pods, ends with the job
        lines += batch
        if victim is None and any(line.step is not None and line.step >= 12 for line in batch):
            victim = next(p for p in await cluster.list_pods("killed") if p.rank == 1)
            await cluster.kill_pod(victim.name)
    assert victim is not None

    job = await cluster.wait_job("killed", COMPLETE, WAIT)
    assert job.phase == JobPhase.COMPLETE and job.restart_attempt == 1
    pods = await cluster.list_pods("killed")
    assert all(p.phase == PodPhase.SUCCEEDED and p.restart_attempt == 1 for p in pods)
    assert all(p.labels[LABEL_RESTART_ATTEMPT] == "1" and p.labels["kfcockpit.io/launch"] == launch for p in pods)
    assert victim.name not in {p.name for p in pods}

    resumed = [parse_line(line.text) for line in lines if "event=resumed" in line.text]
    assert {r["rank"] for r in resumed} == {"0", "1"}
    assert all(int(r["from_step"]) > 0 for r in resumed)
    assert {line.pod for line in lines} >= {victim.name, *(p.name for p in pods)}  # old and new pods, one stream

    recorder.cancel()
    # kill_pod is a delete with grace period 0: the victim goes at once, its last event is DELETED
    victim_events = [e for e in events if e.pod.name == victim.name]
    assert victim_events and victim_events[-1].type == PodEventType.DELETED

    await cluster.wait_job("straight", COMPLETE, WAIT)
    straight, restarted = _metrics(home, "straight"), _metrics(home, "killed")
    assert (straight["resumes"], restarted["resumes"]) == (0, 1)
    assert restarted["params_sha256"] == straight["params_sha256"]
    assert restarted["loss_history"] == straight["loss_history"]


async def _a_pod_that_ended(cluster, job: str, exit_code: int, reason: str):
    """The first pod of `job` the watch shows ended with `exit_code` and `reason`: the pods of the
    last attempt stay once the JobSet failed (JobSet deletes only active Jobs), so a watch that
    began after the earlier attempt's pods went still lists them."""
    async for event in cluster.watch_pods(job):
        if event.pod.exit_code == exit_code and event.pod.reason == reason:
            return event.pod


async def test_restarts_running_out_fails_the_job_with_the_reason(cluster, home):
    """JobSet v0.12's failure policy: each failure restarts the group until maxRestarts, then the
    JobSet fails with ReachedMaxRestarts and its message naming the first failed Job
    (failure_policy.go); the TrainJob carries that condition (the Trainer's jobset plugin). Why a
    worker failed shows on its pod while it is there: its container's exit code and reason."""
    (runtime, volume) = lesson_resources()
    data = runtime.to_manifest()
    data["metadata"]["name"] = "one-retry"
    data["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"] = 1
    (one_retry,) = parse_manifests(yaml.safe_dump(data))
    await apply_all(cluster, one_retry, volume)
    job = lesson_job("doomed", annotations={WARM_ANNOTATION: "true"}).to_manifest()
    job["spec"]["runtimeRef"]["name"] = "one-retry"
    job["spec"]["trainer"]["args"] = ["--steps", "0"]  # training.ddp refuses: exit code 2
    ended = asyncio.create_task(_a_pod_that_ended(cluster, "doomed", 2, "Error"))
    await cluster.apply(parse_manifests(yaml.safe_dump(job))[0])

    failed = await cluster.wait_job("doomed", COMPLETE, WAIT)
    assert failed.phase == JobPhase.FAILED
    assert failed.reason == "ReachedMaxRestarts" and failed.restart_attempt == 1 == failed.max_restarts
    assert failed.message == "jobset failed due to reaching max number of restarts (first failed job: doomed-node-0)"
    await asyncio.wait_for(ended, WAIT)  # why a worker failed, on its pod

    failed_condition = kubectl(home, "wait", "trainjob/doomed", "--for", "condition=Failed", "--timeout=60s")
    assert failed_condition.returncode == 0, failed_condition.stderr  # as kubectl sees it

    job["metadata"]["name"] = "unstartable"
    job["spec"]["trainer"]["command"] = ["no-such-command"]
    ended = asyncio.create_task(_a_pod_that_ended(cluster, "unstartable", 127, "StartError"))
    await cluster.apply(parse_manifests(yaml.safe_dump(job))[0])
    failed = await cluster.wait_job("unstartable", COMPLETE, WAIT)
    assert failed.phase == JobPhase.FAILED and failed.reason == "ReachedMaxRestarts"
    await asyncio.wait_for(ended, WAIT)
