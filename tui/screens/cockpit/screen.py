"""The cockpit screen: the checklist on the left with the step card under it, the panels on the
right (pods, logs, timeline, loss, checkpoints: all at once on a large terminal, as tabs on a small
one; see screens/panels.py), a job bar on top and the footer below.

This is the composition root, where the backend meets the widgets: it lays them out, opens the
session, routes every message and key to the part of the cockpit it concerns (this package:
following a job, the lesson, storage, pod actions), and holds the one net under every worker.
The parts run workers that call the Cluster and the Lesson and hand what they get to widgets by
method calls; widgets report what the learner did with messages. A user error
(backend/errors.py) becomes a one-line notification where it happens; anything else is a bug and
reaches `on_worker_state_changed`, which logs it whole and shows it whole.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterator

from textual import work
from textual.app import ComposeResult
from textual.binding import ActiveBinding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.signal import Signal
from textual.worker import Worker, WorkerState

from backend.errors import USER_ERRORS, one_line
from tui import actions
from tui.screens.cockpit.anatomy import AnatomyView
from tui.screens.cockpit.attempts import AttemptsView
from tui.screens.cockpit.following import GOODPUT_SECONDS, HANG_SECONDS, Following
from tui.screens.cockpit.lesson import LessonDriver
from tui.screens.cockpit.messages import AttemptsChanged, CheckpointsChanged, FollowJob
from tui.screens.cockpit.nodes import NodeActions
from tui.screens.cockpit.pods import PodActions
from tui.screens.cockpit.recording import Recording
from tui.screens.cockpit.storage import Storage
from tui.model.live import LOST, Backoff
from tui.widgets.checklist import Checklist
from tui.widgets.job_bar import JobBar
from tui.widgets.key_bar import KeyBar
from backend.words import count

if TYPE_CHECKING:
    from pathlib import Path

    from textual.widgets import DataTable

    from backend.models import JobSummary
    from tui.widgets.attempt_ledger import AttemptLedger
    from tui.widgets.checkpoints import CheckpointsPanel
    from tui.widgets.log_view import LogView
    from tui.widgets.loss_chart import LossChart
    from tui.screens.panels import Panels
    from tui.widgets.pods_table import PodsTable
    from tui.widgets.step_view import StepView
    from tui.widgets.timeline_view import TimelineView
    from tui.model.session import Session


CHECKLIST_MIN_ROWS = 5  # its border and three steps, however long the card's head


class CockpitScreen(Screen):
    BINDINGS = actions.bindings()

    def __init__(self, session: "Session", errors_log: "Path", clock: Callable[[], float] = time.time,
                 follow: str | None = None) -> None:
        super().__init__(id="cockpit")
        self.session = session
        self.errors_log = errors_log  # where a bug's traceback goes (the state root)
        self.clock = clock
        self.panels_ready = False
        # Published after every change the screen makes from backend data ("pods", "logs",
        # "steps", "connection", "storage"): tests wait on it instead of sleeping.
        self.changed: Signal[str] = Signal(self, "changed")
        self.following = Following(self, wanted=follow)
        self.lesson = LessonDriver(self)
        self.storage = Storage(self)
        self.pod_actions = PodActions(self)
        self.node_actions = NodeActions(self)
        self.anatomy = AnatomyView(self)
        self.attempts = AttemptsView(self)
        self.recording = Recording(self)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield JobBar(id="job-bar")
        with Horizontal(id="body"):
            with Vertical(id="lesson-column"):
                yield Checklist(id="checklist")  # the step card comes under it with the panels
            yield Vertical(id="panels")  # the tabs arrive right after the first paint
        yield KeyBar(compact=True)

    @property
    def checklist(self) -> Checklist:
        return self.query_one(Checklist)

    @property
    def step_view(self) -> "StepView":
        return self.query_one("#step-view")

    @property
    def pods_table(self) -> "PodsTable":
        return self.query_one("#pods-table")

    @property
    def log_view(self) -> "LogView":
        return self.query_one("#log-view")

    @property
    def ckpt_panel(self) -> "CheckpointsPanel":
        return self.query_one("#ckpt-panel")

    @property
    def loss_chart(self) -> "LossChart":
        return self.query_one("#loss-chart")

    @property
    def job_bar(self) -> JobBar:
        return self.query_one(JobBar)

    @property
    def timeline(self) -> "TimelineView":
        return self.query_one("#timeline")

    @property
    def panels(self) -> "Panels":
        return self.query_one("#panels-inner")

    def on_mount(self) -> None:
        self.job_bar.platform = self.session.platform
        self.checklist.focus()
        self.call_after_refresh(self._mount_panels)

    async def _mount_panels(self) -> None:
        from tui.screens.panels import Panels

        config = await self.app.load_preferences()
        panels = Panels(config, self.clock, id="panels-inner")
        await self.query_one("#lesson-column").mount(panels.card)
        await self.query_one("#panels").mount(panels)
        self.step_view.keep_on_exit = self.lesson.keep_note_now
        self.panels_ready = True
        self.set_interval(1.0, self.lesson.tick)
        self.set_interval(GOODPUT_SECONDS, self.following.show_goodput)
        self.set_interval(HANG_SECONDS, self.following.show_hang)
        self.refresh_bindings()
        self.changed.publish("panels")
        self.connect()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Until the panels are mounted (a blink after the first paint) only these keys work.
        While a note is written, none does: its keys are text (ctrl+k too: the editor's
        delete-to-end), and the footer offers what the note itself does. enter and v act on the
        lesson, so only while the lesson has the keys (the checklist or the step card): in the
        logs or the pods, enter is theirs."""
        if not self.panels_ready:
            return action in ("quit", "help", "next_step", "previous_step")
        from textual.widgets import TextArea  # loaded with the panels by now

        if isinstance(self.app.focused, TextArea):
            return False
        view = actions.view_of(action)
        if view is not None:
            return self.panels.is_shown(view)
        if action in ("run_step", "verify_step"):
            focused = self.app.focused
            return focused is None or focused is self.checklist or self.panels.panel_of(focused) == "step"
        return True

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """What the footer offers: at 80 columns the least needed keys make room for the others'
        labels whole (they still work, and help lists them); the nodes view offers its own."""
        bindings = super().active_bindings
        view = "nodes" if self.panels_ready and self.panels.is_shown("nodes") else None
        width = self.app.size.width
        narrow = actions.hidden_from_footer(width, view)
        shown = [active.binding for active in bindings.values()
                 if active.binding.show and active.binding.action not in narrow]
        narrow |= actions.footer_overflow(shown, width, self.app.get_key_display)
        return {key: active._replace(binding=replace(active.binding, show=False))
                if active.binding.action in narrow else active for key, active in bindings.items()}

    def on_descendant_focus(self) -> None:
        if self.panels_ready:
            self.refresh_bindings()  # enter and v come and go with the lesson's focus

    def on_resize(self) -> None:
        self.refresh_bindings()  # the footer's keys depend on the width
        if self.panels_ready:
            from tui.screens.panels import arrangement_for

            self.panels.arrangement = arrangement_for(*self.app.size)
            self.call_after_refresh(self.fit_lesson_column)

    def fit_lesson_column(self) -> None:
        """The checklist keeps its rows unless the card under it would then lose its head (the
        step's title, what is running, its done-when and its keys): then the checklist scrolls."""
        column = self.query_one("#lesson-column").content_region.height
        if not column or not self.step_view.region.height:
            return  # out of sight (another panel zoomed): fitted when it is back
        card = self.step_view.head_rows()
        self.checklist.styles.max_height = max(CHECKLIST_MIN_ROWS, column - card)

    # ------------------------------------------------------------------ connection

    @work(group="connect", exclusive=True, exit_on_error=False)
    async def connect(self) -> None:
        await self.session.open_lesson()
        self.lesson.show_lesson()
        backoff = Backoff()
        while True:
            try:
                await self.session.open_cluster()
                break
            except LOST as exc:
                delay = backoff.next_delay()
                self.following.lost(one_line(exc), delay)
                await asyncio.sleep(delay)
        self.lesson.show_lesson()
        self.following.watch_jobs()
        self.node_actions.watch()
        self.storage.refresh()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one net under every worker (all are `exit_on_error=False`): a user error nobody
        caught is a notification; anything else is a bug, appended whole to the errors log in the
        state root and shown whole in a dialog. Either way the cockpit goes on."""
        error = event.worker.error
        if event.state is not WorkerState.ERROR or error is None:
            return
        where = event.worker.group if event.worker.group != "default" else event.worker.name
        if isinstance(error, USER_ERRORS):
            self.notify(one_line(error), title=f"{where} failed", severity="error")
            return
        from tui.screens.error import ErrorScreen, log_bug

        trace, not_logged = log_bug(self.errors_log, where, error)
        self.app.push_screen(ErrorScreen(where, trace, not_logged or f"logged to {self.errors_log}"))
        self.changed.publish("bug")

    def followed_job(self) -> "tuple[str | None, JobSummary | None]":
        """The job followed (its name, and its summary once listed): what the other parts ask of
        the following part, through the screen."""
        name = self.following.followed
        return name, self.following.jobs.get(name) if name else None

    # ------------------------------------------------------------------ the parts' messages

    def on_follow_job(self, event: FollowJob) -> None:
        self.following.follow(event.job)

    def on_attempts_changed(self, event: AttemptsChanged) -> None:
        self.attempts.refresh()

    def on_checkpoints_changed(self, event: CheckpointsChanged) -> None:
        if event.soon:
            self.storage.checkpoints_changed_soon()
        else:
            self.storage.refresh()

    # ------------------------------------------------------------------ the widgets' messages
    # Handlers by name rather than @on(..., "#id"): @on needs the message class when this module
    # is imported, and the panels' widgets load after the first paint.

    def on_checklist_step_chosen(self, event: Checklist.StepChosen) -> None:
        self.lesson.show_step(event.step_id)

    def on_checklist_run_requested(self, event: Checklist.RunRequested) -> None:
        self.action_run_step()

    def on_step_view_run_pressed(self, event: "StepView.RunPressed") -> None:
        if self.recording.refused():
            return
        self.lesson.start(event.step_id)

    def on_step_view_verify_pressed(self, event: "StepView.VerifyPressed") -> None:
        self.lesson.verify(event.step_id)

    def on_step_view_measure_pressed(self, event: "StepView.MeasurePressed") -> None:
        if self.recording.refused():
            return
        self.lesson.measure(event.step_id)

    def on_step_view_note_edited(self, event: "StepView.NoteEdited") -> None:
        self.lesson.save_note(event.step_id, event.text)

    def on_step_view_note_saved(self, event: "StepView.NoteSaved") -> None:
        self.lesson.note_saved(event.step_id, event.text)

    def on_step_view_leave_note(self, event: "StepView.LeaveNote") -> None:
        if self.panels.zoomed == "step":  # the note was written in the card made whole: back beside the list
            self.panels.zoomed = None
            self._show_zoom()
        self.checklist.focus()

    def on_step_view_head_changed(self, event: "StepView.HeadChanged") -> None:
        self.call_after_refresh(self.fit_lesson_column)

    def on_data_table_row_selected(self, event: "DataTable.RowSelected") -> None:
        if event.control is self.pods_table:
            self.pod_actions.show_logs(event.row_key.value)

    def on_pods_table_grouped(self, event: "PodsTable.Grouped") -> None:
        self.query_one("#rank-summary").show(event.group)
        self.changed.publish("group")

    def on_pods_table_ranks_shown(self, event: "PodsTable.RanksShown") -> None:
        self.following.focus_on(event.ranks, grouped=event.table.group is not None)

    def on_checkpoints_panel_volume_chosen(self, event: "CheckpointsPanel.VolumeChosen") -> None:
        self.storage.load_volume(event.volume)

    def on_panels_shown(self, event: "Panels.Shown") -> None:
        self._show_zoom()
        self.refresh_bindings()  # the nodes view's keys come and go with it
        if event.name == "checkpoints" and self.session.cluster is not None:
            self.storage.refresh()
        elif event.name == "loss":
            self.loss_chart.redraw()

    def on_attempt_ledger_chosen(self, event: "AttemptLedger.Chosen") -> None:
        self.attempts.choose(event.row)

    def on_log_view_flushed(self) -> None:
        self.changed.publish("logs-shown")

    def on_log_view_filter_changed(self) -> None:
        self.changed.publish("logs-shown")

    # ------------------------------------------------------------------ actions (see tui/actions.py)

    def action_run_step(self) -> None:
        if self.recording.refused():
            return
        if self.checklist.step_id is not None:
            self.lesson.start(self.checklist.step_id)

    def action_measure(self) -> None:
        if self.recording.refused():
            return
        step_id = self.checklist.step_id
        lesson = self.session.lesson
        self.lesson.measure(step_id if lesson is not None and step_id and lesson.step(step_id).measure else "10")

    def action_edit_note(self) -> None:
        if self.checklist.step_id is not None and self.session.lesson is not None:
            self.lesson.edit_note(self.checklist.step_id)

    def action_verify_step(self) -> None:
        if self.checklist.step_id is not None:
            self.lesson.verify(self.checklist.step_id)

    def action_next_step(self) -> None:
        self.checklist.move(+1)

    def action_previous_step(self) -> None:
        self.checklist.move(-1)

    def action_kill_pod(self) -> None:
        if self.recording.refused():
            return
        self.pod_actions.ask_kill()

    def action_freeze_pod(self) -> None:
        if self.recording.refused():
            return
        self.pod_actions.toggle_freeze()

    def action_restart_group(self) -> None:
        if self.recording.refused():
            return
        self.pod_actions.ask_restart_group()

    def action_record(self) -> None:
        self.recording.toggle_record()

    def action_replay_pause(self) -> None:
        self.recording.toggle_pause()

    def action_replay_faster(self, steps: str) -> None:
        self.recording.faster(int(steps))

    def action_replay_seek(self, seconds: str) -> None:
        self.recording.seek(float(seconds))

    def action_toggle_nodes(self) -> None:
        self.node_actions.toggle_view()
        self.refresh_bindings()

    def action_fail_node(self) -> None:
        if self.recording.refused():
            return
        self.node_actions.ask_fail()

    def action_restore_node(self) -> None:
        if self.recording.refused():
            return
        self.node_actions.ask_restore()

    def action_cordon_node(self) -> None:
        if self.recording.refused():
            return
        self.node_actions.ask_cordon()

    def action_show_anatomy(self) -> None:
        self.anatomy.show()

    def action_show_logs(self) -> None:
        in_pods = self.panels.panel_of(self.app.focused) == "pods"
        self.pod_actions.show_logs(self.pods_table.selected_pod if in_pods else None)

    def action_go_to_rank(self) -> None:
        self.pod_actions.ask_rank()

    def action_filter_logs(self) -> None:
        self.panels.show("logs", focus=False)
        self.log_view.focus_filter()

    def action_toggle_follow(self) -> None:
        self.log_view.toggle_follow()

    def action_snapshot(self) -> None:
        if self.recording.refused():
            return
        self.storage.ask_snapshot()

    def action_compare(self) -> None:
        self.storage.ask_compare()

    def action_pick_job(self) -> None:
        self.following.pick()

    def action_refresh(self) -> None:
        self.attempts.refresh()
        if self.session.lesson is not None:
            self.lesson.refresh_states()
            self.storage.refresh()

    def action_show_tab(self, tab: str) -> None:
        self.panels.show(tab)

    def action_zoom(self) -> None:
        """The focused panel fills the body (the checklist's focus zooms the step card)."""
        self.panels.toggle_zoom()
        self._show_zoom()

    def _show_zoom(self) -> None:
        zoomed = self.panels.zoomed
        self.set_class(zoomed is not None, "-zoomed")
        self.set_class(zoomed == "step", "-zoomed-card")  # the card's column fills the body
        self.attempts.zoom_changed(zoomed == "timeline")
        self.call_after_refresh(self.fit_lesson_column)  # the column may be back in sight

    def action_toggle_checklist(self) -> None:
        hidden = not self.has_class("-no-checklist")
        self.set_class(hidden, "-no-checklist")
        if hidden and self.app.focused is self.checklist:
            self.panels.focus_panel(self.panels.shown()[0])

    def action_toggle_theme(self) -> None:
        self.app.action_toggle_theme()

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        self.app.push_screen(HelpScreen())

    def action_quit(self) -> None:
        running = self.lesson.running_step
        if running is None:
            self.app.exit()
            return
        from tui.screens.confirm import ConfirmScreen

        self.app.push_screen(
            ConfirmScreen(f"Step {running} is running. Quit?",
                          "Its job keeps running; press v on the step later to check it.", yes="Quit"),
            lambda yes: self.app.exit() if yes else None)

    # ------------------------------------------------------------------ the command palette

    def commands(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        """(title, help, callback) for every action, step and job: the palette lists them all."""
        for a in actions.ACTIONS:
            # A view's key works only in its view; from the palette it opens the view and says how.
            yield a.title, a.help, ((lambda name=a.action: getattr(self, f"action_{name}")()) if a.view
                                    else (lambda name=a.action: self.run_action(name)))
        lesson = self.session.lesson
        for step in (lesson.steps if lesson is not None else []):
            yield (f"Go to {step.label}: {step.title}", step.done_when,
                   lambda sid=step.id: self.checklist.select_step(sid))
        for job in sorted(self.following.jobs.values(), key=lambda j: j.created, reverse=True):
            yield (f"Follow job {job.name}", f"{job.phase.value}, {count(job.num_nodes, 'node')}",
                   lambda name=job.name: self.following.follow(name, by_user=True))
