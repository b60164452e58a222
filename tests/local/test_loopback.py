"""Nothing of the embedded cluster is reachable from another machine: during a 2-worker run every
socket its control plane and its pods listen on is on loopback. Found otherwise (issue 44): rank
0's rendezvous store listened on `*:PORT`, unauthenticated, reachable from the LAN."""

from __future__ import annotations

import asyncio

from backend.local.embedded import Embedded
from tests.local.conftest import WAIT, apply_all, cluster_processes, lesson_job, lesson_resources, run_until_step
from tests.sockets import listening, not_loopback


async def test_during_a_two_worker_run_nothing_listens_beyond_loopback(cluster, home):
    status = await Embedded(home).up()
    await apply_all(cluster, *lesson_resources())
    await cluster.apply(lesson_job(steps=400, step_delay=0.05))
    await asyncio.wait_for(run_until_step(cluster, "lesson-ddp", 3), WAIT)
    pods = cluster_processes(home)
    sockets = listening([status["pid"], *pods])
    assert {pid for _, _, pid in sockets} & set(pods), "no pod socket found: the check saw nothing"
    assert status["pid"] in {pid for _, _, pid in sockets}  # the API server, at least
    assert not_loopback(sockets) == [], sockets
    await cluster.delete("TrainJob", "lesson-ddp")
