"""A job as the cockpit knows it, through real processes on the embedded cluster (issue 43):

- a job that restarted twice before the cockpit opened (JobSet deleted its first two groups' pods
  and their logs with them) is rebuilt from what the platform and the volume keep, the run's
  record included, and shows what `kfcockpit goodput` measures: its restarts, a timeline entry
  each, and its goodput within 0.01; followed again with `j`, the same;
- a running job deleted and applied again under its name is another job (its JobSet's uid): the
  old one's pods, still Terminating, and their lines are not shown with it; it has 0 restarts."""

from __future__ import annotations

import asyncio

import pytest

from backend.connect import connect
from backend.goodput.job import measure_job
from backend.lesson.jobs import apply_runtime_and_volume, fresh_name, lesson_trainjob
from backend.models import JobPhase
from backend.settings import Settings
from tests.tui.conftest import connected, make_app, wait_until
from tests.tui.test_job_history import agrees

WAIT = 240.0
# The job applied again trains about 1.5 s. At 6 steps (0.3 s) it once never showed finished in a
# full suite run, for a reason not found; a failure now says which part never came.
SECOND_STEPS = 30


async def kill_rank_1_at(cluster, job: str, attempt: int, step: int) -> None:
    """Kill the attempt's rank-1 pod once the log shows `step` (a later attempt resumes below it)."""
    async for batch in cluster.stream_logs(job):
        if any(line.step is not None and line.step >= step for line in batch):
            victim = [p for p in await cluster.list_pods(job) if p.restart_attempt == attempt and p.rank == 1]
            await cluster.kill_pod(victim[0].name)
            return


async def test_a_job_opened_after_two_restarts_agrees_with_kfcockpit_goodput_and_one_applied_again_is_new(home):
    cluster = await asyncio.to_thread(connect, Settings(home=home))
    try:
        await apply_runtime_and_volume(cluster)
        name = fresh_name("history")
        await cluster.apply(lesson_trainjob(name, 2, 30, ckpt_every=4, step_delay=0.1))
        await asyncio.wait_for(kill_rank_1_at(cluster, name, 0, 8), WAIT)
        await asyncio.wait_for(kill_rank_1_at(cluster, name, 1, 16), WAIT)
        job = await cluster.wait_job(name, frozenset({JobPhase.COMPLETE}), WAIT)
        assert job.restart_attempt == 2
        cli = (await measure_job(cluster, name)).goodput
        assert cli.restarts == 2 and cli.attempts_unseen == 0
    finally:
        await cluster.close()

    app = make_app(home)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await connected(screen)
        for opened in ("at start", "again with j"):
            await wait_until(screen, lambda: screen.following.followed == name, f"the job followed ({opened})")
            model = screen.timeline.model
            await wait_until(screen, lambda model=model: model.history is not None
                             and len(model.restarts()) == 2, f"its history ({opened})", timeout=WAIT)
            agrees(model, cli, screen.clock(), opened)
            screen.following.follow("another-job", by_user=True)
            await pilot.pause()
            screen.following.follow(name, by_user=True)  # what j does once the learner picks it

        cluster = screen.session.cluster
        again = fresh_name("again")
        await cluster.apply(lesson_trainjob(again, 2, 200, ckpt_every=50, step_delay=0.1))
        screen.following.follow(again, by_user=True)
        table = screen.pods_table
        await wait_until(screen, lambda: len(table.steps) == 2 and all(s >= 3 for s, _ in table.steps.values()),
                         "the first job of the name stepping", timeout=WAIT)
        old = set(table.pods)
        await cluster.delete("TrainJob", again)
        second = lesson_trainjob(again, 2, SECOND_STEPS, ckpt_every=50, step_delay=0.05)
        args = second.spec.trainer.args  # a run directory of its own: it trains from step 1, whenever
        args[args.index("--ckpt-dir") + 1] += "-second"  # the first one stopped
        await cluster.apply(second)

        def new_job_done() -> bool:
            summary = screen.following.jobs.get(again)
            return summary is not None and summary.phase.finished and len(table.steps) == 2 \
                and all(s == SECOND_STEPS for s, _ in table.steps.values())

        try:
            await wait_until(screen, new_job_done, "the job applied again to finish", timeout=WAIT)
        except pytest.fail.Exception:  # say which part never came (once seen in a full suite run only)
            summary = screen.following.jobs.get(again)
            raise AssertionError(f"the job applied again: {summary.phase if summary else 'not listed'}, "
                                 f"followed {screen.following.followed!r}, steps {table.steps}, "
                                 f"pods {list(table.pods)}") from None
        assert screen.following.jobs[again].restart_attempt == 0
        assert not old & set(table.pods), (old, set(table.pods))
        assert not old & set(screen.log_view.buffer.pods)
        assert screen.timeline.model.restarts() == []
        assert screen.timeline.model.goodput_report(screen.clock()).restarts == 0
        assert screen.loss_chart.restarts.get(again, set()) == set()
