"""The embedded cluster through the one client path (`connect` → the kube backend on its
kubeconfig): started on demand, started again after a crash by whichever call or watch finds the
API server gone, and kept down after `kfcockpit cluster down` — a watcher that keeps reopening
(as the cockpit's do) does not bring it back; `cluster up` does. Each test has a state root of its
own: they stop and kill controllers."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from backend.cluster import Unavailable
from backend.connect import connect
from backend.kube.cluster import KubeCluster
from backend.local.client import STOPPED_MESSAGE
from backend.local.embedded import Embedded
from backend.processes import wait_gone_async
from backend.settings import Settings
from tests.local.conftest import WAIT, cli, lesson_job, lesson_resources
from tui.model.live import Backoff, keep_open


def _quick_job(name: str):
    job = lesson_job(name)
    job.spec.trainer.num_nodes = 1
    job.spec.trainer.command = ["python", "-c", "print('step=1 loss=0.500000 rank=0 world=1')"]
    job.spec.trainer.args = []
    return job


@pytest.fixture
async def own_cluster(tmp_path: Path):
    home = tmp_path / "home"
    cluster = await asyncio.to_thread(connect, Settings(home=home))
    yield home, cluster
    await cluster.close()
    await Embedded(home).down()


async def _watch_job_names(cluster):
    """(names seen, reasons lost) queues of a job watch that reopens at once, again and again."""
    seen, lost = asyncio.Queue(), asyncio.Queue()
    task = asyncio.create_task(keep_open(
        cluster.watch_jobs, lambda job: seen.put_nowait(job.name),
        lambda reason, delay: lost.put_nowait(reason), backoff=Backoff(first=0.01, most=0.05)))
    return seen, lost, task


async def _until_seen(seen: asyncio.Queue, name: str) -> None:
    while await asyncio.wait_for(seen.get(), WAIT) != name:
        pass


async def test_connect_starts_the_embedded_cluster_and_drives_it_through_its_api(tmp_path):
    home = tmp_path / "home"
    embedded = Embedded(home)
    assert await embedded.status() is None
    cluster = await asyncio.to_thread(connect, Settings(home=home))
    try:
        assert (await embedded.status())["pid"] > 0  # started on demand
        assert isinstance(cluster, KubeCluster) and cluster.conn.context == "kfcockpit"  # the one client path
        able = cluster.capabilities
        assert able.pods_here and able.pipelines_here and able.fresh and able.volume_path and able.revive
        for resource in lesson_resources():
            await cluster.apply(resource)
        assert [v.name for v in await cluster.volumes()] == ["checkpoints"]
    finally:
        await cluster.close()
        await embedded.down()


async def test_a_crashed_controller_is_started_again_by_the_watch_that_lost_it(own_cluster):
    home, cluster = own_cluster
    for resource in (*lesson_resources(), _quick_job("before")):
        await cluster.apply(resource)
    seen, lost, watcher = await _watch_job_names(cluster)
    try:
        await _until_seen(seen, "before")
        crashed = (await Embedded(home).status())["pid"]
        os.kill(crashed, signal.SIGKILL)
        assert await wait_gone_async([crashed], WAIT) == []
        # The next call starts a new controller; the watch, which lost its stream, follows it there.
        await cluster.apply(_quick_job("after"))
        await _until_seen(seen, "after")
        assert (await Embedded(home).status())["pid"] != crashed
        assert lost.empty()  # the watch never gave up
    finally:
        watcher.cancel()


async def test_cluster_down_with_a_watcher_attached_stays_down(own_cluster):
    home, cluster = own_cluster
    for resource in (*lesson_resources(), _quick_job("quick")):
        await cluster.apply(resource)
    seen, lost, watcher = await _watch_job_names(cluster)
    try:
        await _until_seen(seen, "quick")
        first = await Embedded(home).status()
        assert await Embedded(home).down() == first["pid"]
        reasons = [await asyncio.wait_for(lost.get(), WAIT) for _ in range(5)]
        assert set(reasons) == {STOPPED_MESSAGE}, reasons
        assert await Embedded(home).status() is None  # nobody started a controller meanwhile
        checks = {c.name: c for c in await Embedded(home).checks()}
        assert checks["controller"].detail == "the embedded cluster was stopped (kfcockpit cluster down)"
        with pytest.raises(Unavailable, match=STOPPED_MESSAGE.replace("`", ".")):
            await cluster.list_jobs()
        with pytest.raises(Unavailable, match=STOPPED_MESSAGE.replace("`", ".")):
            await asyncio.to_thread(connect, Settings(home=home))
        result = cli(home, "logs", "quick")
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [f"kfcockpit: {STOPPED_MESSAGE}"]

        up = cli(home, "cluster", "up")  # a user's action starts it, and the watcher is back
        assert up.returncode == 0, up.stderr
        await _until_seen(seen, "quick")
        assert (await Embedded(home).status())["pid"] != first["pid"]
    finally:
        watcher.cancel()
