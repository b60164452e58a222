"""Moving through the lesson, writing a reading step's note, help and the command palette."""

from __future__ import annotations

from textual.command import CommandPalette
from textual.widgets import TextArea

from tests.recording.replayed import replayed_app
from tests.tui.conftest import connected, make_app, wait_until
from tui.screens.help import HelpScreen


async def test_n_and_p_move_through_the_steps_and_the_step_panel_follows(home):
    app, _ = replayed_app(home)  # the lesson's keys: no cluster needed
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await connected(screen)
        assert screen.checklist.step_id == "setup-1"  # nothing done yet: the first step
        await pilot.press("n", "n")
        assert screen.checklist.step_id == "setup-3"
        assert screen.step_view.step.id == "setup-3"
        assert screen.step_view.border_title == "setup 3"
        await pilot.press("n")  # past the "Steps" heading, which cannot be selected
        assert screen.checklist.step_id == "1"
        await pilot.press("p", "p", "p", "p", "p")
        assert screen.checklist.step_id == "setup-1"  # stays at the first step
        for _ in range(20):
            await pilot.press("n")
        assert screen.checklist.step_id == "12"


async def test_a_reading_step_is_done_by_a_note_saved_through_the_engine(home):
    app = make_app(home)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await connected(screen)
        lesson = screen.session.lesson
        await pilot.press("enter")  # setup-1 is a reading step: enter opens its note
        note = screen.step_view.query_one("#step-note", TextArea)
        assert app.focused is note
        note.load_text("Standalone install of the Trainer and Kubeflow Pipelines on kind, with kubectl apply.")
        await pilot.press("ctrl+s")
        await wait_until(screen, lambda: screen.checklist.status.get("setup-1") == "done",
                         "the note's check to pass")
        assert lesson.note("setup-1").startswith("Standalone install")
        assert lesson.state("setup-1").evidence.ok
        assert "done" in str(screen.step_view.query_one("#step-heading").render())

        note.load_text("I have not decided yet.")
        await pilot.press("ctrl+s")
        await wait_until(screen, lambda: screen.checklist.status.get("setup-1") == "failed",
                         "a note that covers nothing to fail its check")


async def test_a_typed_note_is_kept_without_saving_and_escape_gives_the_keys_back(home):
    app = make_app(home)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await connected(screen)
        lesson = screen.session.lesson
        await pilot.press("n", "n", "n", "n")  # step 2, a reading step
        assert screen.checklist.step_id == "2"
        await pilot.press("enter")
        note = screen.step_view.query_one("#step-note", TextArea)
        assert app.focused is note
        note.load_text("")
        await pilot.press(*"pods np")  # n and p are letters here, not step keys
        assert screen.panels.zoomed == "step"  # below 120x36 the note is written in the card made whole
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is screen.checklist
        assert screen.panels.zoomed is None and screen.checklist.display  # the list in sight, not only focused
        assert lesson.note("2") == "pods np"  # kept, though ctrl+s was never pressed
        assert lesson.state("2").evidence is None  # kept, not checked
        await pilot.press("n")  # the keys move through the steps again
        assert screen.checklist.step_id == "3"
        await pilot.press("p", "enter")
        await pilot.press(*" and more")
        app.exit()  # quitting right after typing: the last keys are kept too
    assert lesson.note("2") == "pods np and more"


async def test_help_opens_with_question_mark_and_closes_with_escape(home):
    app, _ = replayed_app(home)  # the lesson's keys: no cluster needed
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").source)
        assert "ctrl+k" in text and "Kill the pod under the cursor" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_the_palette_lists_every_action_and_runs_them(home):
    app, _ = replayed_app(home)  # the lesson's keys: no cluster needed
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await connected(screen)
        titles = [title for title, _, _ in screen.commands()]
        for needed in ("Run the selected step", "Verify the selected step", "Kill the selected pod",
                       "Filter logs", "Snapshot the volume", "Compare two snapshots", "Help", "Quit",
                       "Go to step 6: Kill a worker mid-training and watch the group resume"):
            assert needed in titles
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"go to step 6")
        await pilot.press("enter")
        await wait_until(screen, lambda: screen.checklist.step_id == "6", "the palette to select step 6")
        assert not isinstance(app.screen, CommandPalette)


async def test_the_note_prompt_is_shown_whole_above_the_note_at_80x24():
    from textual.app import App

    from backend.lesson.steps import STEPS
    from tui.widgets.step_view import StepView

    class StepApp(App):
        def compose(self):
            yield StepView()

    step = next(s for s in STEPS if s.id == "setup-1")
    app = StepApp()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(StepView)
        view.show(step, None, "")
        await pilot.pause()
        prompt = view.query_one("#step-note-prompt")
        shown = " ".join(strip.text.strip() for strip in
                         prompt.render_lines(prompt.region.reset_offset)).split()
        assert " ".join(shown).startswith("Your note: " + step.note_prompt)  # nothing cut
        assert "headings too" in " ".join(shown)
        assert "ctrl+s" in str(view.query_one("#step-note").border_title)


async def test_writing_a_note_the_footer_offers_the_notes_keys_not_run_or_kill(home):
    from tests.tui.test_errors import hold_the_cluster
    from tui.screens.confirm import ConfirmScreen

    app = make_app(home)
    hold_the_cluster(app)  # the note needs no cluster
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and bool(screen.checklist.steps), "the checklist")

        def offered() -> set[str]:
            return {b.binding.action for b in screen.active_bindings.values() if b.binding.show}

        assert {"run_highlighted", "kill_pod"} <= offered()  # the checklist's enter runs the step
        screen.checklist.select_step("2")
        await pilot.press("enter")
        note = screen.step_view.query_one("#step-note", TextArea)
        assert app.focused is note
        assert "run_step" not in offered() and "kill_pod" not in offered() and "verify_step" not in offered()
        assert {"save_note", "leave_note"} <= offered()
        note.load_text("The Trainer starts the pods")
        await pilot.press("ctrl+k")  # the editor's delete-to-end-of-line, not a kill
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        assert app.focused is screen.checklist and "run_highlighted" in offered()


async def test_step_7s_card_runs_it_and_has_a_note_editor_that_e_opens(home):
    from tests.tui.test_errors import hold_the_cluster

    app = make_app(home)
    hold_the_cluster(app)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and bool(screen.checklist.steps), "the checklist")
        screen.checklist.select_step("7")
        await pilot.pause()
        view = screen.step_view
        assert view.step.id == "7"
        assert view.query_one("#step-run").display and view.query_one("#step-output").display
        note = view.query_one("#step-note", TextArea)
        assert note.display and view.query_one("#step-note-prompt").display
        await pilot.press("e")
        assert app.focused is note
        await pilot.press(*"1 worker")
        await pilot.press("escape")
        await pilot.pause()
        assert screen.session.lesson.note("7").endswith("1 worker")  # kept through the engine


def _measured(side: str, title: str, recovery: float):
    from backend.compare.figures import Measurement

    return Measurement(side=side, title=title, measured_with="2 pods", launch_model="declared", launch_detail="d",
                       recovery_model="group restart", recovery_detail="r", owner="platform team",
                       owner_detail="o", workers=2, steps=40, time_to_first_step=2.0, killed_rank=1,
                       killed_at_step=12, last_step_before_recovery=12, resumed_from_step=10, steps_lost=2,
                       recovery_seconds=recovery, restarts=1, final_loss=0.0496, wall_seconds=20.0)


async def test_step_10_measures_the_comparison_in_the_cockpit_and_its_open_note_quotes_the_table(home, monkeypatch):
    """The note says to run `kfcockpit compare`: the cockpit runs it (m), shows its lines, and the
    note the learner has started quotes the table where it asked for it, their words kept. The
    comparison itself (a TrainJob and a RayJob, minutes of Ray) is tests/ray's: here it is the
    saved result of one, as run_comparison saves it."""
    import backend.compare
    from backend.compare.figures import Comparison, ComparisonPlan
    from backend.compare.store import save_comparison
    from backend.lesson.notes import MEASURE_FIRST, MEASURED
    from tests.tui.test_errors import hold_the_cluster

    async def compare(settings, progress=print, **_):
        progress("Trainer side: TrainJob cmp-1-trainer, 2 workers, 40 steps, rank 1 killed at step 12")
        progress("Ray side: RayJob cmp-1-ray, same plan (Ray's start-up takes a while)")
        comparison = Comparison(plan=ComparisonPlan(), sides=[_measured("trainer", "Trainer (TrainJob)", 3.1),
                                                              _measured("ray", "Ray Train (RayJob)", 7.4)])
        save_comparison(settings, comparison)
        return comparison

    monkeypatch.setattr(backend.compare, "run_comparison", compare)
    app = make_app(home)
    hold_the_cluster(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and bool(screen.checklist.steps), "the checklist")
        screen.checklist.select_step("10")
        note = screen.step_view.query_one("#step-note", TextArea)
        await wait_until(screen, lambda: MEASURE_FIRST in note.text, "the draft, which asks for a measurement")
        assert screen.step_view.query_one("#step-measure").display
        await pilot.press("e", "end")
        await pilot.press(*"Ray for the ML team")
        await pilot.press("escape")
        await pilot.press("m")
        await wait_until(screen, lambda: MEASURED in note.text, "the measured table in the note")
        assert MEASURE_FIRST not in note.text and "| recovery after kill | 3.1 s | 7.4 s |" in note.text
        assert "Ray for the ML team" in note.text  # what the learner wrote is kept
        assert screen.session.lesson.note("10") == note.text
        output = screen.step_view._outputs["10"]
        assert any(line.startswith("Ray side: RayJob cmp-1-ray") for line in output)
        assert screen.lesson.running_step is None


async def test_at_80_columns_the_footer_labels_are_whole_and_the_keys_left_out_still_work(home):
    from tests.tui.test_errors import hold_the_cluster

    app = make_app(home)
    hold_the_cluster(app)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and bool(screen.checklist.steps), "the checklist")
        await pilot.pause()
        footer = [strip.text for strip in screen._compositor.render_strips()][-1]
        assert "q Quit" in footer and footer.rstrip().endswith("^p palette"), footer  # it ended "z▏^p palettep"
        assert "Zoom" not in footer
        await pilot.press("z")  # left out of the footer, not out of the keys
        assert screen.panels.zoomed is not None
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert "z Zoom" in [strip.text for strip in screen._compositor.render_strips()][-1]


async def test_every_footer_key_is_whole_beside_the_palette_wherever_the_focus_is(home):
    """At 120 columns with the logs focused the footer ended `… ^k Kill l Lo▏^p palette`: the keys
    that do not fit leave whole, the least needed first (tui/model/fitting.py)."""
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    from tests.tui.test_errors import hold_the_cluster

    for size in ((80, 24), (120, 40)):
        app = make_app(home)
        hold_the_cluster(app)
        async with app.run_test(size=size) as pilot:
            screen = app.screen
            await wait_until(screen, lambda s=screen: s.panels_ready and bool(s.checklist.steps), "the checklist")
            for panel in (None, "logs", "pods", "checkpoints", "step"):
                if panel is not None:
                    screen.panels.show(panel)
                footer = screen.query_one(Footer)
                for _ in range(100):  # the footer recomposes for the new focus over a few message rounds
                    await pilot.pause()
                    if any("-command-palette" in k.classes for k in footer.query(FooterKey)):
                        break
                keys = [k for k in footer.query(FooterKey) if "-command-palette" not in k.classes]
                palette = next(k for k in footer.query(FooterKey) if "-command-palette" in k.classes)
                assert keys and all(k.region.right <= palette.region.x for k in keys), (size, panel, [
                    (str(k.render()), k.region) for k in keys], palette.region)
                assert any("Quit" in str(k.render()) for k in keys), (size, panel)
