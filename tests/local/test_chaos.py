"""Chaos on the lesson's cluster: a pod kill and a node failure, in a random order at random
victims (the seed in KFCOCKPIT_CHAOS_SEED, else a fresh one, printed so a failure replays), during
one run: each recreates the group (JobSet v0.12's failure policy; a lost node's pod goes through
kubernetes' node lifecycle, taint eviction and Kueue's failure recovery: test_node_failure.py),
which resumes from the shared volume's checkpoints. The run ends bitwise equal to an uninterrupted
one."""

from __future__ import annotations

import json
import os
import random

from backend.local.embedded import Embedded
from backend.models import JobPhase, PodPhase
from tests.local.conftest import WAIT, apply_all, cluster_events, lesson_job, lesson_resources

COMPLETE = frozenset({JobPhase.COMPLETE})
AT_STEPS = (12, 30)  # a disruption once a worker of the group then running reaches each


def _metrics(home, run: str) -> dict:
    return json.loads((Embedded(home).layout.claim_dir("default", "checkpoints") / run / "metrics.json").read_text())


async def test_random_pod_kills_and_node_failures_end_bitwise_equal(cluster, home):
    seed = int(os.environ.get("KFCOCKPIT_CHAOS_SEED") or random.SystemRandom().randrange(1 << 16))
    print(f"KFCOCKPIT_CHAOS_SEED={seed}")
    chance = random.Random(seed)
    plan = ["kill", "node"]
    chance.shuffle(plan)
    embedded = Embedded(home)
    await apply_all(cluster, *lesson_resources())
    steps = dict(steps=50, step_delay=0.05)
    await cluster.apply(lesson_job("calm", ckpt_dir="/checkpoints/calm", **steps))
    await cluster.wait_job("calm", COMPLETE, WAIT)
    await cluster.apply(lesson_job("chaos", ckpt_dir="/checkpoints/chaos", **steps))

    done: list[tuple[str, str]] = []
    old_pods: set[str] = set()
    lost = None
    async for batch in cluster.stream_logs("chaos"):
        fresh = [line for line in batch if line.pod not in old_pods and line.step is not None]
        if not fresh:
            continue
        if lost is not None:  # the group came back on the node left: the machine may come back too
            await embedded.restore_node(lost)
            lost = None
        if len(done) < len(plan) and max(line.step for line in fresh) >= AT_STEPS[len(done)]:
            pods = [p for p in await cluster.list_pods("chaos") if p.phase == PodPhase.RUNNING]
            victim = chance.choice(sorted(pods, key=lambda p: p.rank))
            old_pods |= {p.name for p in await cluster.list_pods("chaos")}
            what = plan[len(done)]
            if what == "kill":
                await cluster.kill_pod(victim.name)
                done.append((what, victim.name))
            else:
                await embedded.fail_node(victim.node)
                lost = victim.node
                done.append((what, victim.node))
    assert [what for what, _ in done] == plan, (seed, done)

    job = await cluster.wait_job("chaos", COMPLETE, WAIT)
    assert job.restart_attempt == 2, (seed, done, cluster_events(home))
    calm, chaos = _metrics(home, "calm"), _metrics(home, "chaos")
    assert chaos["resumes"] == 2, (seed, done)
    assert chaos["params_sha256"] == calm["params_sha256"], (seed, done)
    assert chaos["loss_history"] == calm["loss_history"], (seed, done)
