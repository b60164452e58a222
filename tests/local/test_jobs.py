"""TrainJobs on the embedded cluster, in real processes: the lesson job as is, a killed worker's
group coming back from its checkpoint with bitwise the same result, restarts running out."""

from __future__ import annotations

import asyncio
import json
import re
from contextlib import aclosing

import pytest
import yaml

from backend.kube.pods import pod_from
from backend.kube.watches import Watches
from backend.local.controllers.job import TRACKING_FINALIZER
from backend.local.registry.strategies.pods import WARM_ANNOTATION
from backend.local.embedded import Embedded
from backend.models import (
    LABEL_JOB,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    JobPhase,
    PodEventType,
    PodPhase,
    parse_manifests,
)
from tests.local.conftest import (
    MANIFESTS,
    WAIT,
    apply_all,
    kill_rank_at_step,
    kubectl,
    lesson_job,
    lesson_resources,
    run_until_step,
    wait_for_pods,
)
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
    victim, lines = await kill_rank_at_step(cluster, "killed", 1, 12)

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


async def _a_pod_that_ended(cluster, job: str, exit_code: int, reason: str, listening: asyncio.Event):
    """The first pod of `job` the watch shows ended with `exit_code` and `reason`. The watch is
    open (`listening` set once it has listed) before the caller applies the job, so it sees every
    pod of every attempt however soon one goes: a failed attempt's pods lose their Job's tracking
    finalizer once their Job is gone (job.py, syncOrphanPod) and nothing keeps them."""
    async with aclosing(Watches(cluster.resources).watch("Pod", label_selector=f"{LABEL_JOB}={job}")) as events:
        async for event in events:
            if event.type == "SYNCED":
                listening.set()
                continue
            pod = pod_from(event.object, deleted=event.type == "DELETED", job=job)
            if pod.exit_code == exit_code and pod.reason == reason:
                return pod
            # or its container's previous run, restarted in place (restartPolicy OnFailure) and
            # killed with its failed Job before it could fail alike: kubectl's "Last State"
            statuses = (event.object.get("status") or {}).get("containerStatuses") or [{}]
            last = (statuses[0].get("lastState") or {}).get("terminated") or {}
            if last.get("exitCode") == exit_code and last.get("reason") == reason:
                return pod


async def _apply_watched(cluster, resource, exit_code: int, reason: str) -> asyncio.Task:
    """Open the watch for a pod of `resource`'s job that ended so, then apply it."""
    listening = asyncio.Event()
    ended = asyncio.create_task(_a_pod_that_ended(cluster, resource.metadata.name, exit_code, reason, listening))
    await asyncio.wait_for(listening.wait(), WAIT)
    await cluster.apply(resource)
    return ended


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
    ended = await _apply_watched(cluster, parse_manifests(yaml.safe_dump(job))[0], 2, "Error")

    failed = await cluster.wait_job("doomed", COMPLETE, WAIT)
    assert failed.phase == JobPhase.FAILED
    assert failed.reason == "ReachedMaxRestarts" and failed.restart_attempt == 1 == failed.max_restarts
    assert failed.message == "jobset failed due to reaching max number of restarts (first failed job: doomed-node-0)"
    await asyncio.wait_for(ended, WAIT)  # why a worker failed, on its pod

    failed_condition = kubectl(home, "wait", "trainjob/doomed", "--for", "condition=Failed", "--timeout=60s")
    assert failed_condition.returncode == 0, failed_condition.stderr  # as kubectl sees it

    job["metadata"]["name"] = "unstartable"
    job["spec"]["trainer"]["command"] = ["no-such-command"]
    ended = await _apply_watched(cluster, parse_manifests(yaml.safe_dump(job))[0], 127, "StartError")
    failed = await cluster.wait_job("unstartable", COMPLETE, WAIT)
    assert failed.phase == JobPhase.FAILED and failed.reason == "ReachedMaxRestarts"
    await asyncio.wait_for(ended, WAIT)


async def test_a_trainjob_deleted_and_applied_again_is_a_new_job_whose_old_pods_go(cluster, home):
    """A learner starting over deletes the running TrainJob and applies it again. The old pods'
    Job is gone (then replaced by a Job of the same name and another uid), so upstream's Job
    controller takes their tracking finalizer off (job_controller.go: deleteJob ->
    cleanupPodFinalizers, updatePod -> enqueueOrphanPod, syncOrphanPod): they end in their grace
    period and go, and only the new job's pods are left."""
    await apply_all(cluster, *lesson_resources())
    await cluster.apply(lesson_job("again", steps=100000, step_delay=0.1))
    old = await asyncio.wait_for(wait_for_pods(cluster, "again", lambda pods: len(pods) == 2 and all(
        p.phase == PodPhase.RUNNING for p in pods.values())), WAIT)
    await run_until_step(cluster, "again", 1)
    raw = {p["metadata"]["uid"]: p for p in json.loads(kubectl(home, "get", "pods", "-o", "json").stdout)["items"]
           if p["metadata"]["name"] in {o.name for o in old}}
    assert len(raw) == 2 and all(TRACKING_FINALIZER in p["metadata"]["finalizers"] for p in raw.values())
    grace = max(int(p["spec"]["terminationGracePeriodSeconds"]) for p in raw.values())

    listening, left = asyncio.Event(), set(raw)

    async def old_pods_gone():
        async with aclosing(Watches(cluster.resources).watch("Pod", label_selector=f"{LABEL_JOB}=again")) as events:
            async for event in events:
                listening.set()  # the first event is the list's, before the delete
                if event.type == "DELETED":
                    left.discard(event.object["metadata"]["uid"])
                    if not left:
                        return

    watching = asyncio.create_task(old_pods_gone())
    await asyncio.wait_for(listening.wait(), WAIT)
    await cluster.delete("TrainJob", "again")
    assert await cluster.apply(lesson_job("again", steps=100000, step_delay=0.1)) == "trainjob/again created"
    try:  # SIGTERM'd, they save and end within their grace period; then nothing may hold them
        await asyncio.wait_for(asyncio.shield(watching), grace + 5)
    except asyncio.TimeoutError:
        watching.cancel()
        left = kubectl(home, "get", "pods", "-o", "wide").stdout
        raise AssertionError(f"the old pods outlived their grace period ({grace} s) + 5 s:\n{left}") from None

    new = await asyncio.wait_for(wait_for_pods(cluster, "again", lambda pods: len(pods) == 2 and all(
        p.phase == PodPhase.RUNNING for p in pods.values())), WAIT)
    listed = json.loads(kubectl(home, "get", "pods", "-o", "json").stdout)["items"]
    assert sorted(p["metadata"]["name"] for p in listed) == sorted(p.name for p in new)
    assert not set(raw) & {p["metadata"]["uid"] for p in listed}
