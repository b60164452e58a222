"""The controller's life: one per state root, killing it leaves no worker behind, a new one takes
over the job, and watches live through the change of controller."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from backend.local.embedded import Embedded
from backend.local.registry.strategies.pods import WARM_ANNOTATION
from backend.processes import is_zombie_or_gone
from backend.models import JobPhase, PodEventType, PodPhase
from tests.local.conftest import (
    REPO,
    WAIT,
    apply_all,
    cli,
    cluster_processes,
    embedded_cluster,
    lesson_job,
    lesson_resources,
    run_until_step,
)

COMPLETE = frozenset({JobPhase.COMPLETE})


async def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait (on pidfds, no polling) until every pid has exited; the ones still alive after `timeout`."""
    loop = asyncio.get_running_loop()
    waits = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        gone = loop.create_future()
        loop.add_reader(fd, lambda g=gone: g.done() or g.set_result(None))
        waits.append((pid, fd, gone))
    try:
        await asyncio.wait_for(asyncio.gather(*(g for _, _, g in waits)), timeout)
    except asyncio.TimeoutError:
        pass
    finally:
        for _, fd, _ in waits:
            loop.remove_reader(fd)
            os.close(fd)
    return [pid for pid in pids if not is_zombie_or_gone(pid)]


async def test_one_controller_per_state_root(home):
    racing = asyncio.gather(*(Embedded(home).up() for _ in range(3)), return_exceptions=True)
    async with embedded_cluster(home):  # the client path, racing them to start it
        statuses = await racing
        assert len({s["pid"] for s in statuses}) == 1, statuses
        assert (await Embedded(home).status())["pid"] == statuses[0]["pid"]
        up = cli(home, "cluster", "up")
        assert up.returncode == 0 and f"pid {statuses[0]['pid']}" in up.stdout
        second = subprocess.run([sys.executable, "-m", "backend.local.controller", "--home", str(home),
                                 "--foreground"], cwd=REPO, capture_output=True, text=True, timeout=WAIT)
        assert second.returncode == 0  # it found the lock taken and left
        assert (await Embedded(home).status())["pid"] == statuses[0]["pid"]


@pytest.mark.parametrize("launch", ["warm", "exec"])
async def test_killing_the_controller_leaves_no_worker_and_the_next_one_finishes_the_job(cluster, home, launch):
    status = await Embedded(home).up()
    await apply_all(cluster, *lesson_resources())
    annotations = {WARM_ANNOTATION: "false"} if launch == "exec" else None
    await cluster.apply(lesson_job(steps=40, step_delay=0.05, annotations=annotations))
    await asyncio.wait_for(run_until_step(cluster, "lesson-ddp", 8), WAIT)
    pods = await cluster.list_pods("lesson-ddp")
    assert {p.labels["kfcockpit.io/launch"] for p in pods} == {launch}
    processes = cluster_processes(home)
    assert len(processes) >= 2  # the workers (and the zygote, torchrun's workers)

    os.kill(status["pid"], signal.SIGKILL)
    assert await _wait_gone(processes, WAIT) == []  # no client is connected: nothing restarted them
    assert cluster_processes(home) == []

    job = await cluster.wait_job("lesson-ddp", COMPLETE, WAIT)  # starts a new controller
    assert job.phase == JobPhase.COMPLETE and job.restart_attempt == 1
    assert (await Embedded(home).status())["pid"] != status["pid"]
    resumed = [line for batch in [b async for b in cluster.stream_logs("lesson-ddp", follow=False)]
               for line in batch if "event=resumed" in line.text]
    assert len(resumed) == 2 and all("from_step=0" not in line.text for line in resumed)


STEPS = 120


async def test_a_pod_watch_lives_through_a_new_controller(cluster, home):
    status = await Embedded(home).up()
    await apply_all(cluster, *lesson_resources())
    # Enough steps that the group is still training when the controller dies, however long the
    # watch and the log stream take to be seen following (a busy machine): ~6 s of steps.
    await cluster.apply(lesson_job(steps=STEPS, step_delay=0.05))
    await asyncio.wait_for(run_until_step(cluster, "lesson-ddp", 5), WAIT)
    events = []
    listed = asyncio.Event()

    async def watch_until_the_new_group_succeeds():
        async for event in cluster.watch_pods("lesson-ddp"):
            events.append(event)
            if len({e.pod.name for e in events}) == 2:
                listed.set()  # both running pods seen
            if event.pod.restart_attempt == 1 and event.pod.phase == PodPhase.SUCCEEDED:
                succeeded = {e.pod.name for e in events
                             if e.pod.restart_attempt == 1 and e.pod.phase == PodPhase.SUCCEEDED}
                if len(succeeded) == 2:
                    return

    lines = []
    following = asyncio.Event()

    async def follow_logs():
        async for batch in cluster.stream_logs("lesson-ddp"):  # ends when the job finishes
            lines.extend(batch)
            if len({line.pod for line in lines if line.step is not None}) == 2:
                following.set()  # both running pods' logs are being followed

    watch = asyncio.create_task(watch_until_the_new_group_succeeds())
    logs = asyncio.create_task(follow_logs())
    await asyncio.wait_for(listed.wait(), WAIT)
    await asyncio.wait_for(following.wait(), WAIT)  # a dead node's pods and logs are gone with it
    first_group = {e.pod.name for e in events}
    os.kill(status["pid"], signal.SIGKILL)
    await asyncio.wait_for(watch, WAIT)
    await asyncio.wait_for(logs, WAIT)

    # The watch re-listed against the new controller: the old group went, the new one came.
    assert {e.pod.name for e in events if e.type == PodEventType.DELETED} >= first_group
    added = {e.pod.name for e in events if e.type == PodEventType.ADDED} - first_group
    assert len(added) == 2
    assert (await cluster.get_job("lesson-ddp")).phase == JobPhase.COMPLETE

    # The log stream resumed from its offsets: both groups' lines, none twice, through to the end.
    # (The first group may have finished its steps before the controller died on a quiet machine:
    # the new one then resumes at the last step and prints its start and resume lines alone.)
    assert {line.pod for line in lines} == first_group | added
    by_pod: dict[str, list[int]] = {}
    last_by_rank: dict[int, int] = {}
    for line in lines:
        if line.step is not None:
            by_pod.setdefault(line.pod, []).append(line.step)
            last_by_rank[line.rank] = max(last_by_rank.get(line.rank, 0), line.step)
    assert all(steps == sorted(set(steps)) for steps in by_pod.values()), {
        pod: [line.text for line in lines if line.pod == pod] for pod, steps in by_pod.items()
        if steps != sorted(set(steps))}
    assert last_by_rank == {0: STEPS, 1: STEPS}


async def test_an_idle_controller_exits_and_the_next_call_starts_another(home, monkeypatch):
    monkeypatch.setenv("KFCOCKPIT_CONTROLLER_IDLE_EXIT", "1")  # read by the controller this test starts
    async with embedded_cluster(home) as cluster:
        first = await Embedded(home).up()
        assert await _wait_gone([first["pid"]], WAIT) == []  # nothing runs, nobody is connected: it left
        assert await Embedded(home).status() is None
        assert await cluster.list_jobs() == []  # a call starts a new one
        assert (await Embedded(home).status())["pid"] != first["pid"]


async def test_a_client_watching_through_the_api_keeps_an_idle_controller_up(home, monkeypatch):
    monkeypatch.setenv("KFCOCKPIT_CONTROLLER_IDLE_EXIT", "1")
    async with embedded_cluster(home) as cluster:
        await apply_all(cluster, *lesson_resources())
        quick = lesson_job("quick")
        quick.spec.trainer.num_nodes = 1
        quick.spec.trainer.command = ["python", "-c", "print('step=1 loss=0.500000 rank=0 world=1')"]
        quick.spec.trainer.args = []
        await cluster.apply(quick)
        await cluster.wait_job("quick", COMPLETE, WAIT)  # nothing runs any more
        pid = (await Embedded(home).status())["pid"]
        watch = cluster.watch_jobs()  # the cockpit's: a watch stream open on the API server
        assert (await anext(watch)).name == "quick"
        assert await _wait_gone([pid], 3.0) == [pid]  # three idle periods later, still serving it
        await watch.aclose()
        assert await _wait_gone([pid], WAIT) == []  # nobody looks now: it leaves


async def test_a_state_root_deeper_than_a_socket_path_allows(tmp_path):
    deep = tmp_path.joinpath(*["a-rather-long-directory-name"] * 5)
    assert len(str(Embedded(deep).layout.socket)) > 108  # beyond sun_path: reached through /proc/self/fd
    async with embedded_cluster(deep) as cluster:  # started the controller, and talked to it
        assert await cluster.list_jobs() == []
        assert (await Embedded(deep).status())["home"] == str(deep)
        assert await Embedded(deep).down() is not None


async def test_losing_the_warm_zygote_takes_its_workers_and_the_group_comes_back(cluster, home):
    await apply_all(cluster, *lesson_resources())
    await cluster.apply(lesson_job(steps=40, step_delay=0.05))
    await asyncio.wait_for(run_until_step(cluster, "lesson-ddp", 5), WAIT)
    (zygote,) = [w for w in (await Embedded(home).status())["warm"] if w["workers"]]
    workers = [pid for pid in cluster_processes(home) if pid != zygote["pid"]]
    assert len(workers) == 2

    os.kill(zygote["pid"], signal.SIGKILL)
    assert await _wait_gone(workers, WAIT) == []  # they die with it (PR_SET_PDEATHSIG)
    job = await cluster.wait_job("lesson-ddp", COMPLETE, WAIT)
    assert job.phase == JobPhase.COMPLETE and job.restart_attempt == 1
    pods = await cluster.list_pods("lesson-ddp")
    assert all(p.restart_attempt == 1 and p.phase == PodPhase.SUCCEEDED for p in pods)
    assert {p.labels["kfcockpit.io/launch"] for p in pods} == {"warm"}  # a new zygote served them
