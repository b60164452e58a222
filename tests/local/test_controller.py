"""The controller's life: one per state root, killing it ends no pod (a new one adopts them and
the job goes on without a restart), and watches live through the change of controller."""

from __future__ import annotations

import asyncio
import json
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


STEPS = 120


def _metrics(home, run: str) -> dict:
    return json.loads((Embedded(home).layout.claim_dir("default", "checkpoints") / run / "metrics.json").read_text())


def _steps_by_rank(lines) -> dict[int, list[int]]:
    by_rank: dict[int, list[int]] = {}
    for line in lines:
        if line.step is not None:
            by_rank.setdefault(line.rank, []).append(line.step)
    return by_rank


@pytest.mark.parametrize("launch", ["warm", "exec"])
async def test_a_control_plane_crash_ends_no_pod_and_the_next_one_adopts_them(cluster, home, launch):
    """Upstream, a container's parent is its runtime's shim, not the kubelet: containerd's
    runtime v2 shim (containerd-shim-runc-v2) "allows the runtime to exit without killing the
    container", and the kubelet, started again, re-lists the runtime's containers through CRI
    (pkg/kubelet/kuberuntime: kubeGenericRuntimeManager.GetPods, the PLEG's relist) and goes on
    with them: a restart of the kubelet, kube-apiserver or the controller manager does not touch
    running pods. Here each run's shim (backend/local/node/shim.py) outlives the controller
    process, SIGKILLed mid-run, twice; the next controller's kubelets adopt the runs: the job completes
    with restart attempt 0 and its pods' containers never restarted, its model bitwise equal to
    an uninterrupted run's, and its log, read through the API, holds every step of each rank
    once."""
    status = await Embedded(home).up()
    await apply_all(cluster, *lesson_resources())
    plan = dict(steps=STEPS, step_delay=0.05)  # ~6 s of steps: still training when the next one starts
    annotations = {WARM_ANNOTATION: "false"} if launch == "exec" else None
    await cluster.apply(lesson_job("straight", ckpt_dir="/checkpoints/straight", **plan))
    await cluster.apply(lesson_job("crashed", ckpt_dir="/checkpoints/crashed", annotations=annotations, **plan))
    await asyncio.wait_for(run_until_step(cluster, "crashed", 8), WAIT)
    before = await cluster.list_pods("crashed")
    assert {p.labels["kfcockpit.io/launch"] for p in before} == {launch}

    killed = [status["pid"]]
    os.kill(status["pid"], signal.SIGKILL)
    # Again, under the controller the next call started (before, four crashes failed a job).
    await asyncio.wait_for(run_until_step(cluster, "crashed", 40), WAIT)
    killed.append((await Embedded(home).status())["pid"])
    os.kill(killed[-1], signal.SIGKILL)
    job = await cluster.wait_job("crashed", COMPLETE, WAIT)  # starts a new controller
    assert (await Embedded(home).status())["pid"] not in killed and len(set(killed)) == 2
    assert job.phase == JobPhase.COMPLETE and job.restart_attempt == 0
    after = await cluster.list_pods("crashed")
    assert {p.name for p in after} == {p.name for p in before}  # the same pods, adopted
    assert all(p.phase == PodPhase.SUCCEEDED and p.restart_attempt == 0 and p.restarts == 0 for p in after)

    lines = [line for batch in [b async for b in cluster.stream_logs("crashed", follow=False)] for line in batch]
    assert not [line.text for line in lines if "event=resumed" in line.text]
    assert _steps_by_rank(lines) == {0: list(range(1, STEPS + 1)), 1: list(range(1, STEPS + 1))}

    await cluster.wait_job("straight", COMPLETE, WAIT)
    straight, crashed = _metrics(home, "straight"), _metrics(home, "crashed")
    assert crashed["resumes"] == 0
    assert crashed["params_sha256"] == straight["params_sha256"]
    assert crashed["loss_history"] == straight["loss_history"]


async def test_a_pod_watch_lives_through_a_new_controller(cluster, home):
    status = await Embedded(home).up()
    await apply_all(cluster, *lesson_resources())
    # Enough steps that the group is still training when the controller dies, however long the
    # watch and the log stream take to be seen following (a busy machine): ~6 s of steps. Upstream
    # (see the test above) a watch through the apiserver outlives a control-plane restart, and so
    # do the pods it watches.
    await cluster.apply(lesson_job(steps=STEPS, step_delay=0.05))
    await asyncio.wait_for(run_until_step(cluster, "lesson-ddp", 5), WAIT)
    events = []
    listed = asyncio.Event()

    async def watch_until_the_group_succeeds():
        async for event in cluster.watch_pods("lesson-ddp"):
            events.append(event)
            if len({e.pod.name for e in events}) == 2:
                listed.set()  # both running pods seen
            succeeded = {e.pod.name for e in events if e.pod.phase == PodPhase.SUCCEEDED}
            if len(succeeded) == 2:
                return

    lines = []
    following = asyncio.Event()

    async def follow_logs():
        async for batch in cluster.stream_logs("lesson-ddp"):  # ends when the job finishes
            lines.extend(batch)
            if len({line.pod for line in lines if line.step is not None}) == 2:
                following.set()  # both running pods' logs are being followed

    watch = asyncio.create_task(watch_until_the_group_succeeds())
    logs = asyncio.create_task(follow_logs())
    await asyncio.wait_for(listed.wait(), WAIT)
    await asyncio.wait_for(following.wait(), WAIT)
    group = {e.pod.name for e in events}
    os.kill(status["pid"], signal.SIGKILL)
    await asyncio.wait_for(watch, WAIT)
    await asyncio.wait_for(logs, WAIT)

    # The watch re-listed against the new controller, which adopted the pods: no pod went or
    # came, the group the same, not restarted.
    assert {e.pod.name for e in events} == group
    assert not [e for e in events if e.type == PodEventType.DELETED]
    assert all(e.pod.restart_attempt == 0 for e in events)
    assert (await cluster.get_job("lesson-ddp")).phase == JobPhase.COMPLETE

    # The log stream resumed from its offsets on the new controller: every step of each rank
    # once, through to the end.
    assert {line.pod for line in lines} == group
    assert _steps_by_rank(lines) == {0: list(range(1, STEPS + 1)), 1: list(range(1, STEPS + 1))}, {
        pod: [line.text for line in lines if line.pod == pod] for pod in group}


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


async def test_warmed_answers_once_the_warm_workers_can_fork_pods(tmp_path):
    """`Embedded.warmed` (bench/goodput.py's, before its first timed job): a controller that runs
    no warm worker yet starts one and answers only once it has imported torch."""
    async with embedded_cluster(tmp_path / "state"):
        embedded = Embedded(tmp_path / "state")
        assert (await embedded.up(warm=False))["warm"] == []
        status = await embedded.warmed()
        assert status["warm"] and all(worker["ready"] for worker in status["warm"])


async def test_losing_the_warm_zygote_ends_no_worker_and_a_new_one_serves_the_next_pods(cluster, home):
    """A warm worker's parent is its shim, not the zygote that forked it (as a container's is
    containerd's shim, not containerd): the zygote's loss ends no pod."""
    await apply_all(cluster, *lesson_resources())
    await cluster.apply(lesson_job(steps=40, step_delay=0.05))
    await asyncio.wait_for(run_until_step(cluster, "lesson-ddp", 5), WAIT)
    (zygote,) = [w for w in (await Embedded(home).status())["warm"] if w["ready"]]

    os.kill(zygote["pid"], signal.SIGKILL)
    assert await _wait_gone([zygote["pid"]], WAIT) == []
    job = await cluster.wait_job("lesson-ddp", COMPLETE, WAIT)
    assert job.phase == JobPhase.COMPLETE and job.restart_attempt == 0
    pods = await cluster.list_pods("lesson-ddp")
    assert all(p.restart_attempt == 0 and p.phase == PodPhase.SUCCEEDED for p in pods)

    await cluster.apply(lesson_job("next", steps=3, ckpt_dir="/checkpoints/next"))
    await cluster.wait_job("next", COMPLETE, WAIT)
    pods = await cluster.list_pods("next")
    assert {p.labels["kfcockpit.io/launch"] for p in pods} == {"warm"}  # a new zygote served them


async def test_cluster_down_stops_every_pod(cluster, home):
    """An explicit stop is not a crash: `cluster down` ends every pod's processes (their shims
    too) before the controller exits."""
    await apply_all(cluster, *lesson_resources())
    await cluster.apply(lesson_job(steps=STEPS, step_delay=0.05))
    await asyncio.wait_for(run_until_step(cluster, "lesson-ddp", 3), WAIT)
    processes = cluster_processes(home)
    assert len(processes) >= 4  # two workers, their shims (and the zygote)
    assert await Embedded(home).down() is not None
    assert await _wait_gone(processes, WAIT) == []
    assert cluster_processes(home) == []
