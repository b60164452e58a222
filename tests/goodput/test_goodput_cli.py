"""`kfcockpit goodput` on a real job of the embedded cluster, with a worker killed mid-run."""

from __future__ import annotations

import json

from backend.goodput import PARTS, Goodput
from backend.goodput.job import measure_job
from backend.local.embedded import Embedded
from backend.models import JobPhase
from tests.local.conftest import WAIT, apply_all, cli, lesson_job, lesson_resources


async def test_a_killed_and_resumed_job_shows_its_restart_and_parts_that_add_up(home, cluster):
    await apply_all(cluster, *lesson_resources(), lesson_job("gp", steps=30, step_delay=0.05))
    created = (await cluster.get_job("gp")).created
    live = Goodput(started=created)  # what the cockpit computes while it follows the job
    victim, superseded = None, 0
    async for batch in cluster.stream_logs("gp"):
        live.feed_lines(batch)
        superseded += sum("event=checkpoint_superseded" in line.text for line in batch)
        if victim is None and any(line.step is not None and line.step >= 10 for line in batch):
            victim = next(p for p in await cluster.list_pods("gp") if p.rank == 1)
            await cluster.kill_pod(victim.name)
    job = await cluster.wait_job("gp", frozenset({JobPhase.COMPLETE}), WAIT)
    assert job.phase == JobPhase.COMPLETE and job.restart_attempt == 1
    live.finish(job.finished)
    followed = live.report()
    assert followed.restarts == 1 and followed.steps_kept == 30
    assert followed.infrastructure_recovery > 0 and followed.program_startup > 0 and followed.productive > 0
    # every 5 steps, some twice (done again after the restart), but one the survivor's save of a
    # newer step gave up (a kill during a periodic save: training/checkpoint.py, Superseded)
    assert superseded <= 1 and followed.saves >= 6 - superseded
    parts = sum(seconds for _, seconds in followed.parts())
    assert abs(parts - followed.total) < 1e-6 and 0 < followed.goodput < 1

    # After the fact, the killed group's pods and logs are gone (JobSet recreated its Jobs), but
    # the run's record on the volume holds both groups: the CLI measures what the cockpit did.
    shown = cli(home, "goodput", "gp", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["job"] == "gp" and report["phase"] == "Complete"
    assert report["steps_kept"] == 30 and report["restarts"] == 1 and report["attempts_unseen"] == 0
    # Line times are the worker's here and the kubelet's there (it reads a line a little later
    # under load): the two books may differ by a fraction of a second, never by a part booked apart.
    assert abs(report["goodput"] - followed.goodput) * followed.total < 0.15  # seconds
    (restart,) = report["restart_times"]
    assert restart["group_formed"] < restart["checkpoint_loaded"] <= restart["first_step"]
    parts = sum(report[p] for p in PARTS)
    assert abs(parts - report["total"]) < 1e-6
    assert 0 <= report["total"] - (job.finished - job.created) < 1  # its newest line, after the whole second
    assert 0 < report["goodput"] < 1

    same = (await measure_job(cluster, "gp")).goodput  # what the CLI printed, through the protocol
    assert same.attempts_unseen == report["attempts_unseen"] and abs(same.goodput - report["goodput"]) < 1e-9

    table = cli(home, "goodput", "gp")
    assert table.returncode == 0 and table.stdout.startswith(f"gp (Complete): goodput {report['goodput']:.3f}")
    rows = table.stdout.splitlines()[2:10]
    assert [line.split("  ")[0] for line in rows] == [
        "productive", "program start-up", "training prep", "checkpoint restore", "checkpoint save",
        "wasted progress", "infrastructure recovery", "other"]
    *_, restart_line, budget = table.stdout.splitlines()
    assert restart_line.startswith("restart 1: ") and "from the failure to the first step" in restart_line
    assert budget == f"restart budget: 1 of {job.max_restarts} used"


async def test_an_unknown_job_or_a_bad_rule_is_one_line_and_exit_2(home, cluster):
    await Embedded(home).up()
    missing = cli(home, "goodput", "no-such-job")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "no-such-job" in missing.stderr
    for bad in (["--hang-floor", "0"], ["--hang-multiple", "x"]):
        refused = cli(home, "goodput", "gp", *bad)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
