"""Text the cockpit did not write is never read as markup: a worker's log line, an error, a note,
a run directory on a volume, a pod's reason. Each place that shows such text (borders, titles,
notifications, Statics, tables, lists, dialogs) is fed one full of `[`, `]`, `[/]` and
`[@click=...]` and must show it as it is, whole, and go on (as markup it either raises, as a Ray
line `[ray-train] … [rank=0, w…` did in step 8's border, or turns into styles and actions).

Names the cluster gives (pods, jobs, volumes, snapshots) cannot hold brackets, but a run is a
directory on a volume and a reason is any text, so every place gets the same text."""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.widgets import DataTable, Log, Select, Static

from backend.lesson.steps import STEPS
from backend.models import (Checkpoint, Evidence, JobPhase, JobSummary, LogLine, Pod, PodEvent,
                            PodEventType, PodPhase, RunMetrics, Snapshot, VolumeInfo)
from tui.config import CockpitConfig
from tui.screens.panels import Panels
from tui.widgets.checkpoints import CheckpointsPanel
from tui.widgets.job_bar import JobBar

# A Ray line as step 8 printed it, then everything markup could make of text.
NASTY = "[ray-train] up: env:// [rank=0, w… [/] [b]x[/b] [@click=app.quit]quit[/] [red"
NOW = 1_000_000.0


def shown(content) -> str:
    """What a Static, a cell or a prompt shows, as plain text."""
    return content.plain


def title(widget) -> str:
    """A border title as drawn. Its public getter hands it back as markup, escaped in a way that
    does not read back (Textual 8: `[rank=0, w…` stays unescaped), so the stored Content is read."""
    return widget._border_title.plain


def subtitle(widget) -> str:
    return widget._border_subtitle.plain


class Host(App):
    def compose(self) -> ComposeResult:
        yield JobBar(id="job-bar")
        panels = Panels(CockpitConfig(), lambda: NOW, id="panels-inner")
        yield panels.card  # under the checklist in the cockpit
        yield panels


async def test_the_panels_show_log_lines_names_reasons_and_notes_as_they_are():
    app = Host()
    async with app.run_test(size=(160, 50)) as pilot:
        panels = app.query_one(Panels)
        panels.follow(NASTY)
        pod = Pod(name=NASTY, job=NASTY, rank=0, phase=PodPhase.FAILED, created=NOW - 5, finished=NOW - 1,
                  reason=NASTY, exit_code=137, last_step=3, last_loss=0.5)
        app.query_one("#pods-table").apply(PodEvent(type=PodEventType.ADDED, pod=pod))
        log_view = app.query_one("#log-view")
        log_view.ingest([LogLine(pod=NASTY, rank=0, time=NOW, text=NASTY)])
        log_view.mark(NASTY)
        step = next(s for s in STEPS if s.id == "8")
        step_view = app.query_one("#step-view")
        step_view.show(step, None, "", running=True)
        step_view.add_output("8", NASTY)  # the line that crashed step 8
        step_view.show_evidence(Evidence(ok=False, checked=NASTY, seen=NASTY, details=[NASTY], at=NOW))
        timeline = app.query_one("#timeline")
        timeline.model.pod_event(PodEvent(type=PodEventType.MODIFIED, pod=pod), NOW)
        timeline.redraw()
        chart = app.query_one("#loss-chart")
        chart.set_finished_runs([RunMetrics(run=NASTY, final_loss=0.1, steps=2, world_size=1, wall_seconds=1.0,
                                            loss_history=[0.2, 0.1], launcher=NASTY)])
        chart.redraw()
        bar = app.query_one(JobBar)
        bar.job = JobSummary(name=NASTY, phase=JobPhase.RUNNING, num_nodes=2, created=NOW)
        bar.connection = NASTY
        await pilot.pause()
        log_view.set_filter(log_view.keep.__class__(text=NASTY))
        log_view._flush()
        await pilot.pause()

        assert title(panels.panel("pods")) == f"pods · {NASTY}"
        assert title(log_view) == f"logs · {NASTY}"
        assert NASTY in subtitle(log_view)  # the filter the learner typed
        options = log_view.query_one("#log-source", Select)._options
        assert f"pod {NASTY}" in [shown(prompt) for prompt, value in options if value == f"pod:{NASTY}"]
        assert any(NASTY in line for line in log_view.query_one(Log).lines)
        table = app.query_one("#pods-table")
        cells = [shown(cell) for cell in table.get_row(NASTY)]
        assert NASTY in cells and f"{NASTY} 137" in cells
        assert NASTY in shown(step_view.query_one("#step-latest", Static).visual)  # whole, as text
        assert NASTY in step_view.output_lines("8")
        evidence = shown(step_view.query_one("#step-evidence", Static).visual)
        assert evidence.count(NASTY) == 3
        assert NASTY in shown(timeline.query_one(".restart", Static).visual)
        legend = shown(chart.query_one("#loss-legend", Static).visual)  # a name too wide loses its middle
        assert NASTY[:20] in legend and NASTY[-12:] in legend
        assert NASTY in shown(bar.render()) and f"{NASTY}" in shown(bar.render())
        assert app.is_running  # no [@click=app.quit] was run


async def test_the_checkpoints_panel_shows_runs_problems_and_names_as_they_are():
    class CheckpointsHost(App):
        def compose(self) -> ComposeResult:
            yield CheckpointsPanel(clock=lambda: NOW)

    app = CheckpointsHost()
    async with app.run_test(size=(120, 30)) as pilot:
        panel = app.query_one(CheckpointsPanel)
        panel.show_volumes([VolumeInfo(name=NASTY)])
        panel.show_checkpoints(NASTY, [Checkpoint(volume=NASTY, path=f"{NASTY}/a.pt", run=NASTY, step=5,
                                                  world_size=2, size_bytes=10, valid=False, problem=NASTY)])
        panel.show_snapshots([Snapshot(name=NASTY, volume=NASTY, created=NOW - 60)])
        await pilot.pause()
        select = panel.query_one("#ckpt-volume", Select)
        assert select.value == NASTY
        prompt = next(prompt for prompt, value in select._options if value == NASTY)
        assert NASTY[-10:] in shown(prompt)  # cut in the middle, if at all
        assert shown(panel.query_one("#ckpt-summary", Static).visual).endswith(f"(step 5: {NASTY})")
        assert shown(panel.query_one("#ckpt-table", DataTable).get_row(f"{NASTY}/a.pt")[0]) == NASTY
        assert [shown(c) for c in panel.query_one("#snap-table", DataTable).get_row(NASTY)[1:3]] == [NASTY, NASTY]
        assert app.is_running


async def test_dialogs_and_notifications_show_names_errors_and_runs_as_they_are(tmp_path):
    from tests.tui.conftest import make_app
    from tui.screens.compare import CompareScreen
    from tui.screens.confirm import ConfirmScreen
    from tui.screens.error import ErrorScreen
    from tui.screens.pick_job import PickJobScreen
    from tui.screens.prompt import PromptScreen
    from textual.widgets import OptionList
    from textual.widgets._toast import Toast

    run = RunMetrics(run=NASTY, final_loss=0.1, steps=2, world_size=1, wall_seconds=1.0, launcher=NASTY)
    snapshot = Snapshot(name=NASTY, volume=NASTY, created=NOW, metrics=[run])
    app = make_app(tmp_path / "home")
    app.session.open_cluster = _never  # no cluster: these are the cockpit's own widgets
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        app.screen.notify(NASTY, title=NASTY, severity="error")  # what a worker's error becomes
        await pilot.pause()
        toast = app.screen.query_one(Toast)
        assert shown(toast.render()) == f"{NASTY}\n{NASTY}"

        for dialog, expected in ((ConfirmScreen(f"Kill pod {NASTY}?", NASTY), f"Kill pod {NASTY}?"),
                                 (PromptScreen(f"Snapshot volume {NASTY} as", NASTY), f"Snapshot volume {NASTY} as"),
                                 (CompareScreen(snapshot, snapshot), f"A  {NASTY}")):
            await app.push_screen(dialog)
            await pilot.pause()
            assert expected in shown(dialog.query_one("#question", Static).visual)
            if isinstance(dialog, CompareScreen):
                table = dialog.query_one(DataTable)
                rows = [[shown(c) if not isinstance(c, str) else c for c in table.get_row_at(i)]
                        for i in range(table.row_count)]
                assert [f"run {NASTY}", "", ""] in rows and ["  launcher", NASTY, NASTY] in rows
            dialog.dismiss(None)
            await pilot.pause()

        job = JobSummary(name=NASTY, phase=JobPhase.RUNNING, num_nodes=2, created=time.time())
        picker = PickJobScreen([job], None)
        await app.push_screen(picker)
        await pilot.pause()
        assert NASTY in shown(picker.query_one(OptionList).get_option_at_index(0).prompt)
        picker.dismiss(None)
        error = ErrorScreen(NASTY, NASTY, NASTY)
        await app.push_screen(error)
        await pilot.pause()
        assert shown(error.query_one("#error-where", Static).visual).startswith(f"{NASTY} failed.")
        assert app.is_running


async def _never() -> None:
    import asyncio

    await asyncio.Event().wait()
