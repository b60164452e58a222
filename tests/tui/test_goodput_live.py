"""Goodput live in the cockpit: the followed job's pods and lines, fed through the screen's real
watches from a scripted cluster (no controller), show in the job bar and the failure timeline,
and a restart moves time from productive into infrastructure recovery."""

from __future__ import annotations


import pytest

from backend.models import JobPhase, LogLine, Pod, PodEvent, PodEventType, PodPhase
from tests.tui.conftest import wait_until
from tests.tui.scripted import JOB, T0, ScriptedCluster, scripted_app


def approx(seconds: float):
    return pytest.approx(seconds, abs=1e-6)


def pod(rank: int, attempt: int, phase: PodPhase = PodPhase.RUNNING, **kw) -> PodEvent:
    kind = kw.pop("type", PodEventType.MODIFIED if phase is not PodPhase.RUNNING else PodEventType.ADDED)
    return PodEvent(type=kind, pod=Pod(name=f"{JOB}-node-0-{rank}-a{attempt}xyz", job=JOB, rank=rank,
                                       restart_attempt=attempt, phase=phase, created=T0 + 30 * attempt, **kw))


def line(rank: int, attempt: int, at: float, text: str) -> LogLine:
    return LogLine.parsed(f"{JOB}-node-0-{rank}-a{attempt}xyz", rank, T0 + at, text)


def steps(attempt: int, first: int, last: int, at: float) -> list[LogLine]:
    """Both ranks' step lines, one step a second from `at`."""
    return [line(rank, attempt, at + i, f"step={s} loss=0.5 rank={rank} world=2")
            for i, s in enumerate(range(first, last + 1)) for rank in (0, 1)]


def starts(attempt: int, at: float) -> list[LogLine]:
    return [line(rank, attempt, at, f"event=start rank={rank} world=2 pid={100 * attempt + rank} steps=99 "
                 f"restart={attempt}") for rank in (0, 1)]


async def first_group(screen, cluster: ScriptedCluster, now: list[float]) -> None:
    """Attempt 0: started at 2 s, steps 1..10 from 3 s to 12 s."""
    await wait_until(screen, lambda: screen.following.followed == JOB, "the cockpit to follow the job")
    for event in (pod(0, 0, started=T0 + 1), pod(1, 0, started=T0 + 1)):
        cluster.pods.put_nowait(event)
    cluster.logs.put_nowait(starts(0, 2.0) + steps(0, 1, 10, 3.0))
    now[0] = T0 + 12.0
    bar = screen.job_bar
    await wait_until(screen, lambda: bar.goodput is not None and bar.goodput.steps_kept == 10,
                     "the first group's steps in the job bar's goodput")


def kill(cluster: ScriptedCluster, now: list[float]) -> None:
    """Rank 1 is killed at 12.4 s; rank 0 saves step 10; the group is torn down and recreated."""
    cluster.pods.put_nowait(pod(1, 0, PodPhase.FAILED, started=T0 + 1, finished=T0 + 12.4,
                                reason="Killed", exit_code=137))
    cluster.logs.put_nowait([line(0, 0, 12.8, "event=checkpoint_saved step=10 reason=peer_failure "
                                  "file=x bytes=1 seconds=0.2 rank=0")])
    for rank in (0, 1):
        cluster.pods.put_nowait(pod(rank, 0, type=PodEventType.DELETED))
        cluster.pods.put_nowait(pod(rank, 1, started=T0 + 31))
    now[0] = T0 + 20.0


async def second_group(screen, cluster: ScriptedCluster, now: list[float]) -> None:
    """Attempt 1 starts at 32 s, resumes from step 10 and steps 11..15 from 33 s."""
    cluster.logs.put_nowait(starts(1, 32.0) + [line(0, 1, 32.5, "event=resumed from_step=10 rank=0 world=2")]
                            + steps(1, 11, 15, 33.0))
    now[0] = T0 + 37.0
    bar = screen.job_bar
    await wait_until(screen, lambda: bar.goodput.restarts == 1 and bar.goodput.steps_kept == 15,
                     "the new group's steps")


async def test_the_job_bar_and_the_timeline_show_goodput_and_a_restart_moves_its_parts(home):
    app, cluster, now = scripted_app(home)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        bar = screen.job_bar
        await first_group(screen, cluster, now)
        before = bar.goodput
        # steps 1-10, step 1 as long as the mean: 10 s of 12, the 2 s before the group formed start-up
        assert before.productive == approx(10.0) and before.program_startup == approx(2.0)
        assert before.wasted_progress == before.infrastructure_recovery == 0 and before.restarts == 0
        assert "goodput 83%" in bar.render().plain
        await pilot.pause()
        assert "goodput 83%" in screen.timeline.query_one("#goodput").render().plain

        kill(cluster, now)
        await wait_until(screen, lambda: bar.goodput.infrastructure_recovery > 0,
                         "the recovery to count while the group is down")
        # from the interrupted step's start (step 10's line, 12 s), the survivor's save apart
        assert bar.goodput.infrastructure_recovery == approx(8.0 - 0.2) and bar.goodput.productive == approx(10.0)
        await second_group(screen, cluster, now)
        after = bar.goodput
        assert after.infrastructure_recovery == approx(32.0 - 12.0 - 0.2) and after.checkpoint_save == approx(0.2)
        assert after.training_prep == approx(0.5) and after.productive == approx(10.0 + 0.5 + 4.0)
        assert after.goodput < before.goodput
        shown = bar.render().plain
        assert "goodput 39%" in shown and "recovery 19.8s" in shown and "ckpt save 0.2s" in shown
        await pilot.pause()
        timeline = screen.timeline.query_one("#goodput").render().plain
        for part in ("productive 14.5 s", "infrastructure recovery 19.8 s (1 restart: the last step before the",
                     "program start-up 2.0 s",
                     "training prep 0.5 s", "checkpoint save 0.2 s"):
            assert part in timeline

        # the job ends: the wall time stops at its finished time, whatever the clock says
        cluster.jobs.put_nowait(cluster.job.model_copy(update={"phase": JobPhase.COMPLETE, "finished": T0 + 37.0}))
        now[0] = T0 + 100.0
        await wait_until(screen, lambda: bar.goodput.finished, "the finished job's goodput")
        assert bar.goodput.total == approx(37.0)


def test_goodput_after_a_restart_at_160x45(home, snap_compare):
    app, cluster, now = scripted_app(home)

    async def restarted(pilot) -> None:
        screen = pilot.app.screen
        await first_group(screen, cluster, now)
        kill(cluster, now)
        await second_group(screen, cluster, now)
        chart = screen.loss_chart
        # every line read into the chart's model, then drawn now, not at its next tick (a busy
        # machine once took the picture with the curve still at step 8 and no restart mark)
        await wait_until(screen, lambda: chart.series.get(chart.live_run) and max(chart.series[chart.live_run]) == 15
                         and chart.restarts.get(chart.live_run), "the whole curve and its restart in the chart")
        await pilot.pause()  # laid out as it is now
        # drawn at that size now, not at their next ticks (4 workers on two cores: 0.6 s of waiting
        # for those once took the chart drawn before its layout, with one x tick)
        chart.redraw()
        screen.timeline.redraw()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 45), run_before=restarted)


async def test_the_goodput_summary_lays_the_screen_out_only_when_it_gains_or_loses_a_line():
    """A running job's seconds change every tick: a repaint of the summary, not a layout of the
    screen; a part that took no time until now adds a line, and that lays out."""
    from textual.app import App

    from backend.goodput import GoodputReport
    from tui.widgets.timeline_view import TimelineView

    class TimelineApp(App):
        def compose(self):
            yield TimelineView(id="timeline")

    app = TimelineApp()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(TimelineView)
        summary = view.query_one("#goodput")
        first = GoodputReport(start=0.0, end=10.0, productive=8.0, program_startup=2.0)
        view.show_goodput(first)
        for _ in range(100):  # until laid out: its bar is drawn at its width
            if summary.size.width:
                break
            await pilot.pause()
        view.show_goodput(first)
        await pilot.pause()
        layouts = []  # what the summary asks for (the screen's own layouts may lag under load)
        refresh = summary.refresh
        summary.refresh = lambda *a, **k: (layouts.append(1) if k.get("layout") else None, refresh(*a, **k))[1]
        for end in (11.0, 12.0):  # the same parts, more seconds
            view.show_goodput(GoodputReport(start=0.0, end=end, productive=end - 2.0, program_startup=2.0))
            await pilot.pause()
        assert layouts == []
        assert "productive 10.0 s" in summary.render().plain
        view.show_goodput(GoodputReport(start=0.0, end=13.0, productive=10.0, program_startup=2.0,
                                        infrastructure_recovery=1.0))
        await pilot.pause()
        assert layouts and "infrastructure recovery 1.0 s" in summary.render().plain
