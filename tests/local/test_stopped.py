"""`kfcockpit cluster down` sticks: a watcher that keeps reopening (as the cockpit's do) does not
start the controller again; `cluster up` or an apply does. A crashed controller is still started
again on demand."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from backend.cluster import Unavailable
from backend.local.client import STOPPED_MESSAGE
from backend.local.processes import wait_gone_async
from tests.local.conftest import WAIT, apply_all, cli, lesson_job, lesson_resources
from tui.live import Backoff, keep_open


def _quick_job():
    job = lesson_job("quick")
    job.spec.trainer.num_nodes = 1
    job.spec.trainer.command = ["python", "-c", "print('step=1 loss=0.500000 rank=0 world=1')"]
    job.spec.trainer.args = []
    return job


async def test_cluster_down_with_a_watcher_attached_stays_down(cluster, home):
    await apply_all(cluster, *lesson_resources(), _quick_job())
    listed, lost = asyncio.Queue(), asyncio.Queue()
    watcher = asyncio.create_task(keep_open(
        cluster.watch_jobs, listed.put_nowait, lambda reason, delay: lost.put_nowait(reason),
        backoff=Backoff(first=0.01, most=0.05)))  # reopens at once, again and again
    try:
        assert (await asyncio.wait_for(listed.get(), WAIT)).name == "quick"  # the watch is open
        first = await cluster.status()
        assert await cluster.down() == first["pid"]
        reasons = [await asyncio.wait_for(lost.get(), WAIT) for _ in range(5)]
        assert set(reasons) == {STOPPED_MESSAGE}, reasons
        assert await cluster.status() is None  # nobody started a controller meanwhile
        with pytest.raises(Unavailable, match=STOPPED_MESSAGE.replace("`", ".")):
            await cluster.list_jobs()
        result = cli(home, "get", "pods")
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [f"kfcockpit: {STOPPED_MESSAGE}"]
        preflight = {c.name: c for c in await cluster.preflight()}
        assert preflight["controller"].detail == "the local cluster was stopped (kfcockpit cluster down)"

        up = cli(home, "cluster", "up")  # a user's action starts it, and the watcher is back
        assert up.returncode == 0, up.stderr
        while (await asyncio.wait_for(listed.get(), WAIT)).name != "quick":
            pass
        assert (await cluster.status())["pid"] != first["pid"]
    finally:
        watcher.cancel()


async def test_an_apply_starts_a_stopped_cluster_and_a_crashed_one_restarts_on_demand(cluster):
    await cluster.up()
    await cluster.down()
    with pytest.raises(Unavailable):
        await cluster.list_pods()
    (volume,) = [r for r in lesson_resources() if r.kind == "PersistentVolumeClaim"]
    assert await cluster.apply(volume) == "persistentvolumeclaim/checkpoints created"
    crashed = (await cluster.status())["pid"]
    os.kill(crashed, signal.SIGKILL)
    assert await wait_gone_async([crashed], WAIT) == []
    assert await cluster.list_pods() == []  # not stopped on purpose: the next call starts one
    assert (await cluster.status())["pid"] != crashed
