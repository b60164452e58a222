"""The job bar on its own: it says what it knows in the room it has, never cut mid-word, and it
never claims "no job followed" while the panels follow one."""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import App, ComposeResult

from backend.goodput import GoodputReport
from backend.models import JobPhase, JobSummary
from tui.widgets.job_bar import JobBar


class BarApp(App):
    def compose(self) -> ComposeResult:
        yield JobBar()


def busy_bar(bar: JobBar) -> None:
    """What the bar showed at 120 columns while step 7 ran: a job, its step and loss, its goodput
    with time lost, and the running step."""
    bar.platform = "local"
    bar.connection = "connected"
    bar.job = JobSummary(name="lesson-scale-2w-a1b2c3", phase=JobPhase.RUNNING, num_nodes=2, max_restarts=3,
                         created=0.0)
    bar.progress = (40, 0.049644)
    bar.show_goodput(GoodputReport(start=0.0, end=30.0, productive=25.0, infrastructure_recovery=2.0,
                                   checkpoint_save=1.5, program_startup=1.5))
    bar.running_step = "step 7"
    bar.running_for = 72.0


async def test_the_running_step_is_never_cut_and_the_least_telling_parts_go_first():
    app = BarApp()
    for width in (200, 120, 80):
        async with app.run_test(size=(width, 3)) as pilot:
            bar = app.query_one(JobBar)
            busy_bar(bar)
            await pilot.pause()
            shown = bar.render().plain
            assert cell_len(shown) <= width, (width, shown)
            assert shown.startswith("kfcockpit ") and shown.endswith("running step 7 · 1m12s"), (width, shown)
            name = "lesson…1b2c3" if width == 80 else "lesson-scale-2w-a1b2c3"  # only a name loses its middle
            assert "● connected" in shown and f"{name} Running" in shown, (width, shown)
            if width == 200:
                assert "kfcockpit local" in shown and "goodput 83%" in shown and " · recovery 2.0s" in shown
            if width == 120:  # the goodput's share stays; the time lost is the timeline's to tell
                assert "goodput 83%" in shown and "recovery" not in shown and "step 40" in shown
            if width == 80:  # the room reads the goodput at 80 columns too: the name gives up its middle
                assert "goodput 83%" in shown, shown
        app = BarApp()


async def test_a_followed_job_the_cluster_has_not_listed_is_named_not_denied():
    app = BarApp()
    async with app.run_test(size=(120, 3)) as pilot:
        bar = app.query_one(JobBar)
        bar.connection = "connected"
        bar.followed = "lesson-pipeline-5d2e1f"  # a step named it; its pipeline failed before creating it
        await pilot.pause()
        shown = bar.render().plain
        assert "no job followed" not in shown
        assert "lesson-pipeline-5d2e1f not on the cluster (yet)" in shown
        bar.running_step = "step 12"
        await pilot.resize_terminal(78, 3)  # too narrow for all that even without the optional parts
        await pilot.pause()
        shown = bar.render().plain
        assert cell_len(shown) <= 78 and shown.endswith("running step 12 · 0s"), shown
        assert "  lesson-pi…e-5d2e1f not on the cluster (yet)" in shown, shown  # its middle goes, not the reason


async def test_the_step_counter_is_redrawn_at_a_readers_rate_the_newest_step_last():
    import asyncio

    from tui.widgets.job_bar import PROGRESS_SECONDS

    app = BarApp()
    async with app.run_test(size=(120, 3)) as pilot:
        bar = app.query_one(JobBar)
        bar.job = JobSummary(name="j", phase=JobPhase.RUNNING, num_nodes=2, created=0.0)
        shown = []
        bar.watch(bar, "progress", lambda value: shown.append(value), init=False)  # every value drawn
        for step in range(1, 51):  # a job stepping fifty times a second
            bar.show_progress(step, 1 / step)
        assert shown == [(1, 1.0)]
        await asyncio.sleep(PROGRESS_SECONDS)  # the cool-down: what the test is about
        await pilot.pause()
        assert shown == [(1, 1.0), (50, 1 / 50)] and "step 50" in bar.render().plain


async def test_a_hang_and_the_last_restart_are_said_at_80_columns():
    from backend.hangs import Hang

    app = BarApp()
    async with app.run_test(size=(80, 3)) as pilot:
        bar = app.query_one(JobBar)
        busy_bar(bar)
        bar.running_step = None
        bar.job = JobSummary(name="lesson-ddp", phase=JobPhase.RUNNING, num_nodes=2, max_restarts=3,
                             restart_attempt=2, created=0.0)
        await pilot.pause()
        shown = bar.render().plain
        assert "attempt 2/3 · 1 more restart allowed" in shown, shown  # the next failure is the last one allowed
        bar.hang = Hang(step=40, silent=12.4, usual=0.5, limit=10.0, stopped=(1,), waiting=(0,), running=(0, 1))
        await pilot.pause()
        shown = bar.render().plain
        assert cell_len(shown) <= 80 and "HUNG rank 1 at step 40: 12s silent (step 500ms)" in shown, shown
        bar.job = bar.job.model_copy(update={"restart_attempt": 3})
        bar.hang = None
        await pilot.pause()
        shown = bar.render().plain
        assert "attempt 3/3 · no more restarts" in shown and "HUNG" not in shown, shown


async def test_the_jobs_own_progress_report_is_shown_where_its_cluster_has_one():
    app = BarApp()
    async with app.run_test(size=(160, 3)) as pilot:
        bar = app.query_one(JobBar)
        busy_bar(bar)
        bar.job = bar.job.model_copy(update={"progress": 40, "remaining": 75})  # status.trainerStatus
        await pilot.pause()
        assert "step 40 40% ~1m15s left" in bar.render().plain, bar.render().plain


async def test_a_hang_at_a_long_step_is_never_cut_at_80_columns():
    """At 80 columns a hang keeps who stopped and where; its silence goes before the line is cut."""
    from backend.hangs import Hang

    app = BarApp()
    async with app.run_test(size=(80, 3)) as pilot:
        bar = app.query_one(JobBar)
        busy_bar(bar)
        bar.running_step = None
        bar.job = JobSummary(name="lesson-ddp", phase=JobPhase.RUNNING, num_nodes=2, max_restarts=3, created=0.0)
        bar.hang = Hang(step=12345, silent=154.0, usual=0.164, limit=10.0, stopped=(0,), waiting=(1,),
                        running=(0, 1))
        await pilot.pause()
        shown = bar.render().plain
        assert cell_len(shown) <= 80 and shown.endswith("HUNG rank 0 at step 12345"), shown


async def test_a_silence_with_a_reason_is_named_not_hung_and_cut_at_its_end_at_80_columns():
    app = BarApp()
    async with app.run_test(size=(80, 3)) as pilot:
        bar = app.query_one(JobBar)
        busy_bar(bar)
        bar.running_step = None
        bar.silence = ("waiting for a node after kfcockpit-worker2 was lost: 0/3 nodes are available: 1 node(s) "
                       "had untolerated taint {node.kubernetes.io/unreachable: }, 2 Insufficient nvidia.com/gpu")
        await pilot.pause()
        shown = bar.render().plain
        assert cell_len(shown) <= 80 and "HUNG" not in shown, shown
        assert "Running  waiting for a node a" in shown, shown  # the scheduler's details go first
        assert "…" in shown.partition("waiting")[2], shown
        bar.silence = None
        await pilot.pause()
        assert "waiting" not in bar.render().plain
