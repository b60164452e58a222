"""Names are shown so they still say which is which: runs in the compare dialog and the checkpoints
table whole ("run lesson-sca" twice could not be told apart, "lesson-resume-" said no run), a
volume's name on one row of its list, cut in its middle when it must be; and a step card's border
carries its run's newest line only while it runs (a passed step kept an old error there)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from backend.lesson.steps import STEPS
from backend.models import Checkpoint, RunMetrics, Snapshot, VolumeInfo
from tui.screens.compare import CompareScreen
from tui.widgets.checkpoints import CheckpointsPanel
from tui.widgets.step_view import StepView

NOW = 1_000_000.0


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def metrics(run: str, workers: int) -> RunMetrics:
    return RunMetrics(run=run, final_loss=0.05 * workers, steps=40, world_size=workers, wall_seconds=3.0)


async def test_at_80x24_the_compare_dialog_names_both_runs_and_both_snapshots_whole():
    one, two = "lesson-scale-1w-a1b2c3", "lesson-scale-2w-d4e5f6"
    a = Snapshot(name=one, volume="checkpoints", created=NOW, metrics=[metrics(one, 1)])
    b = Snapshot(name=two, volume="checkpoints", created=NOW, metrics=[metrics(one, 1), metrics(two, 2)])
    app = App()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.push_screen(CompareScreen(a, b))
        await pilot.pause()
        text = screen_text(app)
        assert f"run {one}" in text and f"run {two}" in text, text
        assert f"A  {one}" in text and f"B  {two}" in text, text


async def test_at_80x24_checkpoint_runs_snapshots_and_a_long_volume_name_are_readable():
    volume = "3f2a9c1e-58b4-4c2e-9d11-7b0e6c5a4f21-checkpoints"  # a pipeline's volume

    class Host(App):
        def compose(self) -> ComposeResult:
            yield CheckpointsPanel(clock=lambda: NOW)

    app = Host()
    async with app.run_test(size=(48, 24)) as pilot:  # the checkpoints tab beside the checklist at 80x24
        panel = app.query_one(CheckpointsPanel)
        panel.show_volumes([VolumeInfo(name="checkpoints"), VolumeInfo(name=volume)])
        panel.show_checkpoints("checkpoints", [
            Checkpoint(volume="checkpoints", path=f"{run}/ckpt-step-000005.pt", run=run, step=5, world_size=2,
                       size_bytes=9000, valid=True) for run in ("lesson-resume-a1b2c3", "lesson-resume-d4e5f6")])
        panel.show_snapshots([Snapshot(name="lesson-scale-1w-a1b2c3", volume="checkpoints", created=NOW - 60)])
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert any("lesson-resume-a1b2c3" in line for line in lines)
        assert any("lesson-resume-d4e5f6" in line for line in lines)
        assert any("lesson-scale-1w-a1b2c3" in line for line in lines)
        panel.query_one("#ckpt-volume").value = volume
        await pilot.pause()
        shown = screen_text(app).splitlines()
        assert shown[0].startswith("3f2a9c1e-") and "…" in shown[0], shown[0]  # its middle goes…
        header = next(i for i, line in enumerate(shown) if "RUN" in line)
        # …not its one row (the summary beside it may wrap; the name does not)
        assert not any(part in line for line in shown[1:header] for part in ("3f2a", "4f21", "checkpoints")), shown[:3]
        assert shown[header].split() == next(line for line in lines if "RUN" in line).split()


async def test_a_step_card_shows_the_newest_run_line_whole_only_while_it_runs():
    """The newest line is read whole, wrapped under the heading (a call to action at 120x40 was cut
    in the border: `kill a worker now: ctrl+k o…`); the run output wraps too."""
    step = next(s for s in STEPS if s.id == "6")
    call = ("kill a worker now: ctrl+k on a pod in the pods panel, or from a shell: kubectl delete pod "
            "lesson-ddp-node-0-1-abcde (the group restarts and resumes from its newest checkpoint)")

    class Host(App):
        def compose(self) -> ComposeResult:
            yield StepView()

    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(StepView)
        view.show(step, None, "", running=True)
        view.add_output("6", call)
        await pilot.pause()
        latest = view.query_one("#step-latest")
        assert latest.display and str(latest.render()).replace("\n", " ").split() == ["▸", *call.split()]
        assert latest.region.height > 1 and latest.region.right <= view.region.right  # wrapped inside the card
        assert not view.border_subtitle
        output = view.query_one("#step-output")
        assert output.virtual_size.width <= output.scrollable_content_region.width  # wrapped, not cut
        view.show(step, None, "")  # the run ended (and a later verify passed)
        await pilot.pause()
        assert not view.query_one("#step-latest").display
        assert call in view.output_lines("6")  # still in its output


async def test_the_checkpoint_browser_opens_on_the_followed_volume_one_tab_from_its_table_and_ages_tick():
    """It opened on a pipeline run's uuid volume (sorted first), the volume selector was two Tabs
    away with a focus a shade apart, and AGE stood still until `r`."""
    from textual.widgets import Select

    uuid = "101f8b90-58b4-4c2e-9d11-7b0e6c5a4f21-checkpoints"
    now = [NOW]

    class Host(App):
        def compose(self) -> ComposeResult:
            yield CheckpointsPanel(clock=lambda: now[0])

    app = Host()
    async with app.run_test(size=(100, 24)) as pilot:
        panel = app.query_one(CheckpointsPanel)
        panel.show_volumes([VolumeInfo(name=uuid), VolumeInfo(name="checkpoints")])  # before a job is followed
        panel.show_volumes([VolumeInfo(name="checkpoints"), VolumeInfo(name=uuid)], "checkpoints")
        assert panel.volume == "checkpoints"
        panel.show_checkpoints("checkpoints", [Checkpoint(volume="checkpoints", path="r/ckpt-step-000005.pt",
                                                          run="r", step=5, world_size=2, size_bytes=9, valid=True,
                                                          created=NOW - 5)])
        table = panel.query_one("#ckpt-table")
        table.focus()
        await pilot.pause()
        select = panel.query_one("#ckpt-volume", Select)
        unfocused = select.query_one("SelectCurrent").styles.background
        await pilot.press("tab")
        assert app.focused is select
        await pilot.pause()
        assert select.query_one("SelectCurrent").styles.background != unfocused
        await pilot.press("tab")
        assert app.focused is panel.query_one("#snap-table")
        await pilot.press("shift+tab", "shift+tab")
        assert app.focused is table
        assert "5s" in screen_text(app)
        now[0] += 60  # a minute on: the AGE column says so without `r`
        panel._tick()
        await pilot.pause()
        assert "1m5s" in screen_text(app)
        panel.show_volumes([VolumeInfo(name="checkpoints"), VolumeInfo(name=uuid)], uuid)  # another job followed
        assert panel.volume == uuid
        panel.picked = True  # the learner chose: a followed job's volume no longer replaces it
        panel.show_volumes([VolumeInfo(name="checkpoints"), VolumeInfo(name=uuid)], "checkpoints")
        assert panel.volume == uuid


async def test_a_step_cards_code_and_link_read_whole_in_a_narrow_card():
    """At 80x24 setup 1's link ended `…/docs/started/installin`, and backticks showed raw."""
    from tui.widgets.step_view import doc_content, with_code

    class Host(App):
        def compose(self) -> ComposeResult:
            yield StepView()

    app = Host()
    async with app.run_test(size=(50, 40)) as pilot:  # the step tab beside the checklist at 80x24
        view = app.query_one(StepView)
        for step in STEPS:
            view.show(step, None, "")
            await pilot.pause()
            why = view.query_one("#step-why")
            assert "`" not in str(why.render()), step.id
            view.query_one("#step-doc").scroll_visible(animate=False)
            await pilot.pause()
            doc = view.query_one("#step-doc")
            screen = screen_text(app).splitlines()
            rows = [screen[y][doc.region.x:doc.region.right].strip() for y in range(doc.region.y, doc.region.bottom)]
            assert step.doc_url in "".join(rows), (step.id, rows)  # folded onto rows, not cut
            assert doc.region.right <= view.region.right
    assert with_code("run `kubectl get pods` now").plain == "run kubectl get pods now"
    assert "now: Use Platform-Specific Features" in doc_content("t", "u", "Use Platform-Specific Features").plain
