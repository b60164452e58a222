"""A straggler to practise on, end to end on the embedded cluster: one rank of four slowed to half
its speed (`kfcockpit pod slow`, the kubelet's duty cycle) is named from the ranks' own compute
times within three windows, and `kfcockpit goodput` reports it. Bad input: a factor out of range,
an unknown pod. The detector's rules themselves: tests/backend/test_stragglers.py."""

from __future__ import annotations

import asyncio

import pytest

from backend.errors import NotFound
from backend.models import PodPhase
from backend.stragglers import StragglerRule, StragglerWatch
from tests.local.conftest import WAIT, apply_all, cli, lesson_job, lesson_resources, run_until_step

RULE = StragglerRule(window=10, warmup=5)


async def _running_pods(cluster, job: str, ranks: int) -> dict[int, str]:
    async for event in cluster.watch_pods(job):
        pods = {p.rank: p.name for p in await cluster.list_pods(job) if p.phase == PodPhase.RUNNING}
        if len(pods) == ranks and event.pod.phase == PodPhase.RUNNING:
            return pods
    raise AssertionError("the pod watch ended")


class Follow:
    """The job's lines fed to a straggler watch as they come; the newest step read so far."""

    def __init__(self, cluster, job: str):
        self.watch, self.step = StragglerWatch(RULE), 0
        self.named = asyncio.get_running_loop().create_task(self._follow(cluster, job))

    async def _follow(self, cluster, job: str) -> None:
        async for batch in cluster.stream_logs(job):
            self.watch.lines(batch)
            self.step = max([self.step] + [line.step for line in batch if line.step is not None])
            if self.watch.stragglers:
                return


async def test_one_rank_of_four_slowed_to_half_is_named_a_straggler(cluster, home):
    await apply_all(cluster, *lesson_resources())
    job = lesson_job("slow", steps=400, step_delay=0.03)
    job.spec.trainer.num_nodes = 4
    # A quarter CPU each: four fit on the lesson's two nodes of this machine's cores, with room
    # for goodput's reader pod. A wider model, so a step computes for longer than the kubelet's tick.
    job.spec.trainer.resources_per_node.requests["cpu"] = "250m"
    job.spec.trainer.args += ["--hidden", "1024", "--batch-size", "128"]
    await cluster.apply(job)
    pods = await asyncio.wait_for(_running_pods(cluster, "slow", 4), WAIT)
    follow = Follow(cluster, "slow")
    assert "SIGSTOP/SIGCONT duty cycle" in (cluster.capabilities.slows_pods or "")
    await cluster.slow_pod(pods[2], 0.5)
    slowed_at = follow.step  # the log's newest step then: the rank slows from a later one
    await asyncio.wait_for(follow.named, WAIT)
    (straggler,) = follow.watch.stragglers
    assert straggler.rank == 2 and straggler.speed < RULE.threshold, straggler
    # within three windows of the slowing (the window it fell in counted as one)
    assert straggler.steps[1] <= slowed_at + 3 * RULE.window, (straggler, slowed_at)

    # goodput judges the run's record in its default windows (20 steps after 5 of warm-up)
    default = StragglerRule()
    await asyncio.wait_for(run_until_step(cluster, "slow", default.warmup + 2 * default.window + 5), WAIT)
    report = await asyncio.to_thread(cli, home, "goodput", "slow")
    assert report.returncode == 0 and "straggler rank 2: " in report.stdout, report.stdout + report.stderr
    undone = await asyncio.to_thread(cli, home, "pod", "slow", pods[2], "--factor", "1")
    assert undone.returncode == 0 and f"pod/{pods[2]} at full speed again" in undone.stdout, undone.stderr
    await cluster.delete("TrainJob", "slow")


async def test_slowing_an_unknown_pod_or_by_a_bad_factor_says_so_in_one_line(cluster, home):
    with pytest.raises(NotFound, match="pod nosuch not found"):
        await cluster.slow_pod("nosuch", 0.5)
    for args in (["nosuch", "--factor", "0.5"], ["nosuch", "--factor", "0"], ["nosuch", "--factor", "1.5"]):
        done = await asyncio.to_thread(cli, home, "pod", "slow", *args)
        assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr, \
            done.stderr
