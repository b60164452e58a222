"""The cockpit screen: the checklist on the left, the panels on the right (step, pods, logs,
timeline, loss, checkpoints: all at once on a large terminal, as tabs on a small one; see
screens/panels.py), a job bar on top and the footer below.

This is where the backend meets the widgets, and nothing else happens here: workers call the
Cluster and the Lesson and hand what they get to widgets by method calls; widgets report what the
learner did with messages. A user error (backend/errors.py) becomes a one-line notification where
it happens; anything else is a bug and reaches the one worker-error handler at the end of this
class, which logs it whole and shows it whole.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable, Iterator

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.signal import Signal
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from backend.errors import USER_ERRORS, NotFound, one_line
from tui import actions
from tui.live import LOST, Backoff, keep_open, sample
from tui.widgets.checklist import Checklist
from tui.widgets.job_bar import JobBar

if TYPE_CHECKING:
    from pathlib import Path

    from textual.widgets import DataTable

    from backend.models import Evidence, JobSummary, LogLine, PodEvent
    from tui.widgets.checkpoints import CheckpointsPanel
    from tui.widgets.log_view import LogView
    from tui.widgets.loss_chart import LossChart
    from tui.screens.panels import Panels
    from tui.widgets.pods_table import PodsTable
    from tui.widgets.step_view import StepView
    from tui.widgets.timeline_view import TimelineView
    from tui.session import Session

CHECKPOINT_REFRESH_SECONDS = 3.0  # at most this often while a job writes checkpoints


class CockpitScreen(Screen):
    BINDINGS = actions.bindings()

    def __init__(self, session: "Session", errors_log: "Path", clock: Callable[[], float] = time.time) -> None:
        super().__init__(id="cockpit")
        self.session = session
        self.errors_log = errors_log  # where a bug's traceback goes (the state root)
        self.clock = clock
        self.jobs: dict[str, "JobSummary"] = {}
        self.followed: str | None = None
        self.followed_by_user = False
        self.running_step: str | None = None
        self._storage_timer = None
        self._step_started: float | None = None
        self.panels_ready = False
        # Published after every change the screen makes from backend data ("pods", "logs",
        # "steps", "connection", "storage"): tests wait on it instead of sleeping.
        self.changed: Signal[str] = Signal(self, "changed")

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield JobBar(id="job-bar")
        with Horizontal(id="body"):
            yield Checklist(id="checklist")
            yield Vertical(id="panels")  # the tabs arrive right after the first paint
        yield Footer(compact=True)

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
        await self.query_one("#panels").mount(Panels(config, self.clock, id="panels-inner"))
        self.step_view.keep_on_exit = self._keep_note_now
        self.panels_ready = True
        self._tick_timer = self.set_interval(1.0, self._tick_running)
        self.refresh_bindings()
        self.changed.publish("panels")
        self.connect()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Until the panels are mounted (a blink after the first paint) only these keys work.
        enter and v act on the lesson, so only while the lesson has the keys (the checklist or
        the step card): in the logs or the pods, enter is theirs."""
        if not self.panels_ready:
            return action in ("quit", "help", "next_step", "previous_step")
        if action in ("run_step", "verify_step"):
            return self._focus_on_lesson()
        return True

    def _focus_on_lesson(self) -> bool:
        focused = self.app.focused
        if focused is None or focused is self.checklist:
            return True
        return self.panels.panel_of(focused) == "step"

    def on_descendant_focus(self) -> None:
        if self.panels_ready:
            self.refresh_bindings()  # enter and v come and go with the lesson's focus

    def on_resize(self) -> None:
        if self.panels_ready:
            from tui.screens.panels import arrangement_for

            self.panels.arrangement = arrangement_for(*self.app.size)

    # ------------------------------------------------------------------ connection

    @work(group="connect", exclusive=True, exit_on_error=False)
    async def connect(self) -> None:
        await self.session.open_lesson()
        self._show_lesson()
        backoff = Backoff()
        while True:
            try:
                await self.session.open_cluster()
                break
            except LOST as exc:
                delay = backoff.next_delay()
                self._lost(one_line(exc), delay)
                await asyncio.sleep(delay)
        self._show_lesson()
        self.watch_jobs()
        self.refresh_storage()

    def _connected(self) -> None:
        if self.job_bar.connection != "connected":
            was_lost = self.job_bar.connection != "connecting"
            self.job_bar.connection = "connected"
            if was_lost:
                self.notify("connected to the cluster again", title="cluster")
            self.changed.publish("connection")

    def _lost(self, reason: str, delay: float) -> None:
        if self.job_bar.connection in ("connected", "connecting"):
            self.notify(f"{reason}; retrying", title="cluster unreachable", severity="warning")
        self.job_bar.connection = f"retry in {delay:.0f}s · {reason}"
        self.changed.publish("connection")

    # ------------------------------------------------------------------ jobs, pods, logs

    @work(group="jobs", exclusive=True, exit_on_error=False)
    async def watch_jobs(self) -> None:
        cluster = self.session.cluster

        async def jobs() -> "Iterator[JobSummary]":
            listed = await cluster.list_jobs()
            self._connected()
            for job in listed:
                self.jobs[job.name] = job
            self._choose_job()
            async for job in cluster.watch_jobs():
                yield job

        await keep_open(jobs, self._job_changed, self._lost)

    def _job_changed(self, job: "JobSummary") -> None:
        self._connected()
        before = self.jobs.get(job.name)
        self.jobs[job.name] = job
        if job.name == self.followed:
            self.job_bar.job = job
            if job.phase.finished and (before is None or not before.phase.finished):
                self.refresh_storage()
        elif before is None:
            self._choose_job()
        self.changed.publish("jobs")

    def _choose_job(self) -> None:
        """Follow the newest unfinished job (else the newest), unless the learner chose one."""
        if self.followed_by_user or not self.jobs:
            return
        newest = sorted(self.jobs.values(), key=lambda j: j.created, reverse=True)
        best = next((j for j in newest if not j.phase.finished), newest[0])
        current = self.jobs.get(self.followed) if self.followed else None
        if current is None or (best.created > current.created):
            self.follow(best.name)

    def follow(self, job: str, by_user: bool = False) -> None:
        self.followed_by_user = by_user
        if job == self.followed:
            return
        self.followed = job
        self.job_bar.job = self.jobs.get(job)
        self.job_bar.progress = (None, None)
        self.query_one("#pods-panel").border_title = f"pods · {job}"
        self.pods_table.reset(job)
        self.log_view.reset(job)
        self.timeline.reset(job)
        self.loss_chart.follow_run(job)
        self.watch_pods(job)
        self.sample_usage(job)
        self.stream_logs(job)
        self.changed.publish("follow")

    @work(group="pods", exclusive=True, exit_on_error=False)
    async def watch_pods(self, job: str) -> None:
        cluster = self.session.cluster
        try:
            await keep_open(lambda: cluster.watch_pods(job), self._pod_changed, self._lost,
                            on_reopen=lambda: self.pods_table.reset(job, keep_history=True),
                            gives_up=_job_gone)
        except NotFound as exc:
            self.notify(one_line(exc), title=f"stopped following {job}", severity="warning")

    def _pod_changed(self, event: "PodEvent") -> None:
        self._connected()
        if event.pod.job != self.followed:
            return
        before = self.pods_table.pods.get(event.pod.name)
        latest = self.pods_table.latest_attempt
        self.pods_table.apply(event)
        self.timeline.model.pod_event(event, self.clock())
        pod = event.pod
        self._mark_in_logs(event, before, latest)
        if pod.last_step is not None and pod.restart_attempt >= self.pods_table.latest_attempt:
            self.job_bar.progress = (pod.last_step, pod.last_loss)
            if before is None or before.last_step != pod.last_step:
                self._checkpoints_changed_soon()
        self.changed.publish("pods")

    @work(group="usage", exclusive=True, exit_on_error=False)
    async def sample_usage(self, job: str) -> None:
        """The pods' CPU and memory (metrics.k8s.io is read, not watched) while the table shows."""
        from tui.widgets.pods_table import USAGE_SECONDS

        table = self.pods_table
        await sample(lambda: self.session.cluster.pod_usage(job), table.show_usage,
                     every=USAGE_SECONDS, wanted=lambda: table.wants_usage)

    @work(group="logs", exclusive=True, exit_on_error=False)
    async def stream_logs(self, job: str) -> None:
        cluster = self.session.cluster

        async def finished() -> bool:
            summary = await cluster.get_job(job)
            return summary.phase.finished

        try:
            await keep_open(lambda: cluster.stream_logs(job, follow=True), self._log_batch, self._lost,
                            on_reopen=lambda: self.log_view.reset(job), done=finished,
                            gives_up=_job_gone)
        except NotFound as exc:
            self.notify(one_line(exc), title=f"stopped the logs of {job}", severity="warning")

    def _mark_in_logs(self, event: "PodEvent", before, latest: int) -> None:
        """A separator in the merged logs where a worker failed and where a new group started:
        the lines either side belong to different attempts."""
        from tui import format as fmt

        pod = event.pod
        failed = pod.phase.value == "Failed" or (event.type.value == "DELETED" and pod.phase.value != "Succeeded")
        was_failed = before is not None and before.phase.value == "Failed"
        if failed and not was_failed and before is not None:
            why = pod.reason or ("deleted" if event.type.value == "DELETED" else "failed")
            code = f", exit {pod.exit_code}" if pod.exit_code is not None else ""
            self.log_view.mark(f"✘ pod {fmt.short_name(pod.name, pod.job)} (rank {fmt.rank_label(pod.rank)}, attempt "
                               f"{pod.restart_attempt}) {why}{code}")
        elif event.type.value != "DELETED" and pod.restart_attempt > latest and before is None:
            self.log_view.mark(f"↻ restart attempt {pod.restart_attempt}: a new group starts")

    def _log_batch(self, batch: list["LogLine"]) -> None:
        self.log_view.ingest(batch)
        self.loss_chart.add_lines(batch)
        self.timeline.model.add_lines(batch)
        self.changed.publish("logs")

    def on_log_view_flushed(self) -> None:
        self.changed.publish("logs-shown")

    def on_log_view_filter_changed(self) -> None:
        self.changed.publish("logs-shown")

    # ------------------------------------------------------------------ checkpoints and snapshots

    @work(group="storage", exclusive=True, exit_on_error=False)
    async def refresh_storage(self) -> None:
        cluster = self.session.cluster
        if cluster is None:
            return
        volumes = await self._call("list volumes", cluster.volumes())
        if volumes is not None:
            preferred = set(self.jobs[self.followed].volumes) if self.followed in self.jobs else set()
            volumes.sort(key=lambda v: (v.name not in preferred, v.name))
            self.ckpt_panel.show_volumes(volumes)
            if self.ckpt_panel.volume is not None:
                await self._load_volume(self.ckpt_panel.volume)
        snapshots = await self._call("list snapshots", cluster.snapshots())
        if snapshots is not None:
            self.ckpt_panel.show_snapshots(snapshots)
        self.changed.publish("storage")

    async def _load_volume(self, volume: str) -> None:
        cluster = self.session.cluster
        checkpoints = await self._call(f"read checkpoints on {volume}", cluster.checkpoints(volume))
        if checkpoints is not None:
            self.ckpt_panel.show_checkpoints(volume, checkpoints)
        metrics = await self._call(f"read metrics on {volume}", cluster.read_metrics(volume=volume))
        if metrics:
            self.loss_chart.set_finished_runs(metrics)

    @work(group="volume", exclusive=True, exit_on_error=False)
    async def load_volume(self, volume: str) -> None:
        await self._load_volume(volume)
        self.changed.publish("storage")

    def _checkpoints_changed_soon(self) -> None:
        """A job stepped; its checkpoints may have changed. Read them when the tab is open, and
        not more often than every few seconds (on kube, a read starts a pod)."""
        if self._storage_timer is not None or not self.panels.is_shown("checkpoints"):
            return

        def due() -> None:
            self._storage_timer = None
            if self.ckpt_panel.volume is not None:
                self.load_volume(self.ckpt_panel.volume)

        self._storage_timer = self.set_timer(CHECKPOINT_REFRESH_SECONDS, due)

    def on_checkpoints_panel_volume_chosen(self, event: "CheckpointsPanel.VolumeChosen") -> None:
        self.load_volume(event.volume)

    # Handlers by name rather than @on(..., "#id"): @on needs the message class when this module
    # is imported, and DataTable and the panels load after the first paint.
    def on_panels_shown(self, event: "Panels.Shown") -> None:
        self.set_class(self.panels.zoomed is not None, "-zoomed")
        if event.name == "checkpoints" and self.session.cluster is not None:
            self.refresh_storage()
        elif event.name == "loss":
            self.loss_chart.redraw()

    # ------------------------------------------------------------------ the lesson

    def _show_lesson(self) -> None:
        lesson = self.session.lesson
        if self.checklist.steps:  # already shown: keep the learner's place
            self._refresh_states()
            return
        self.checklist.set_steps(lesson.steps, lesson.states())
        self.changed.publish("steps")

    def _show_step(self, step_id: str) -> None:
        lesson = self.session.lesson
        if lesson is None:
            return
        step = lesson.step(step_id)
        try:
            note = lesson.note(step_id) if step.kind == "reading" else ""
        except (OSError, ValueError) as exc:  # unreadable note file: the learner can fix it
            self.notify(one_line(exc), title=f"note of {step.label}", severity="error")
            note = ""
        self.step_view.show(step, lesson.state(step_id), note, running=step_id == self.running_step)
        if step.kind == "reading" and not note:
            self.load_draft(step_id)

    @work(group="draft", exclusive=True, exit_on_error=False)
    async def load_draft(self, step_id: str) -> None:
        """A reading step with no note yet starts from the engine's draft (headings, prompts and,
        for step 10, the measured runs); an untouched draft does not pass the check."""
        try:
            text = await self.session.lesson.draft_note(step_id)
        except USER_ERRORS as exc:
            self.notify(one_line(exc), title="no draft for the note", severity="warning")
            return
        self.step_view.offer_draft(step_id, text)

    def _refresh_states(self) -> None:
        states = self.session.lesson.states()
        if self.running_step is not None:  # our own run is live whatever the file says
            states.pop(self.running_step, None)
        self.checklist.set_states(states)
        if self.checklist.step_id is not None:
            self._show_step(self.checklist.step_id)
        self.changed.publish("steps")

    def on_checklist_step_chosen(self, event: Checklist.StepChosen) -> None:
        self._show_step(event.step_id)

    def on_checklist_run_requested(self, event: Checklist.RunRequested) -> None:
        self.action_run_step()

    def on_step_view_run_pressed(self, event: "StepView.RunPressed") -> None:
        self._start_step(event.step_id)

    def on_step_view_verify_pressed(self, event: "StepView.VerifyPressed") -> None:
        self.verify_step(event.step_id)

    def on_step_view_note_edited(self, event: "StepView.NoteEdited") -> None:
        self._save_note(event.step_id, event.text, "note not kept")

    def _keep_note_now(self, step_id: str, text: str) -> None:
        """Called by the step view as it unmounts (quitting): no message would be handled then."""
        if self.session.lesson is not None:
            self._save_note(step_id, text, "note not kept")

    def on_step_view_leave_note(self, event: "StepView.LeaveNote") -> None:
        self.checklist.focus()

    def on_step_view_note_saved(self, event: "StepView.NoteSaved") -> None:
        if self._save_note(event.step_id, event.text, "note not saved"):
            self.notify("note saved; checking it", title=self.session.lesson.step(event.step_id).label)
            self.verify_step(event.step_id)

    def _save_note(self, step_id: str, text: str, failed: str) -> bool:
        """Save through the engine; a refused note (too long) or a full disk is a notification."""
        try:
            self.session.lesson.save_note(step_id, text)
        except (*USER_ERRORS, OSError) as exc:
            self.notify(one_line(exc), title=failed, severity="error")
            return False
        return True

    def _start_step(self, step_id: str) -> None:
        lesson = self.session.lesson
        if lesson is None or self._still_connecting(step_id):
            return
        if self.running_step is not None:
            self.notify(f"step {self.running_step} is still running; its result comes first",
                        severity="warning")
            return
        step = lesson.step(step_id)
        if step.kind == "reading":
            self.panels.show("step", focus=False)
            self.step_view.focus_note()
            self.notify("a reading step is done by your note: write it, then ctrl+s", title=step.label)
            return
        self.run_step(step_id)

    @work(group="step-run", exit_on_error=False)
    async def run_step(self, step_id: str) -> None:
        lesson = self.session.lesson
        step = lesson.step(step_id)
        self.running_step = step_id
        self._step_started = self.clock()
        self.job_bar.running_for = 0.0
        self.job_bar.running_step = step.label
        self.checklist.set_status(step_id, "running")
        self.step_view.clear_output(step_id)
        self.step_view.add_output(step_id, f"$ run {step.label}: {step.title}")
        if self.checklist.step_id == step_id:
            self._show_step(step_id)
            self.step_view.show_output_box()
        try:
            async for update in lesson.run(step_id):
                if update.kind == "line":
                    self.step_view.add_output(step_id, update.text)
                elif update.kind == "job" and update.job:
                    self.step_view.add_output(step_id, f"following job {update.job}")
                    self.follow(update.job)
                elif update.kind == "evidence" and update.evidence is not None:
                    self._announce(step.label, update.evidence)
        except USER_ERRORS as exc:
            self.step_view.add_output(step_id, f"error: {one_line(exc)}")
            self.notify(one_line(exc), title=step.label, severity="error")
        finally:
            self.running_step = None
            self.job_bar.running_step = None
            self._refresh_states()

    def _announce(self, label: str, evidence: "Evidence") -> None:
        if evidence.ok:
            self.notify(evidence.seen, title=f"{label} done ✔")
        else:
            self.notify(evidence.seen, title=f"{label} not done yet ✘", severity="warning")

    def _still_connecting(self, step_id: str) -> bool:
        """A step that needs the cluster, asked for before it has answered: say so, and touch
        nothing (a check now would only find the cluster missing)."""
        lesson = self.session.lesson
        if self.session.cluster is not None or lesson.unavailable(step_id) is None:
            return False
        self.notify("still connecting to the cluster: try again once the top bar says connected",
                    title=lesson.step(step_id).label, severity="warning")
        return True

    @work(group="step-verify", exit_on_error=False)
    async def verify_step(self, step_id: str) -> None:
        lesson = self.session.lesson
        try:
            if lesson is None or self._still_connecting(step_id):
                return
            evidence = await lesson.verify(step_id)
            self._announce(lesson.step(step_id).label, evidence)
            self._refresh_states()
        except USER_ERRORS as exc:
            self.notify(one_line(exc), title=f"verify {step_id}", severity="error")
        finally:
            self.changed.publish("verified")

    # ------------------------------------------------------------------ pods: kill

    def _kill_confirmed(self, pod: str, yes: bool | None) -> None:
        if yes:
            self.kill_pod(pod)

    @work(group="kill", exit_on_error=False)
    async def kill_pod(self, pod: str) -> None:
        cluster = self.session.cluster
        if await self._call(f"kill {pod}", cluster.kill_pod(pod), ok=True) is not None:
            self.notify(f"killed {pod}: watch the group restart and resume", title="fault injected")

    def on_data_table_row_selected(self, event: "DataTable.RowSelected") -> None:
        if event.control is not self.pods_table:  # by name: see on_tabbed_content_tab_activated
            return
        self.log_view.show_pod(event.row_key.value)
        self.panels.show("logs")

    # ------------------------------------------------------------------ snapshots: take, compare

    def _snapshot_named(self, volume: str, name: str | None) -> None:
        if name:
            self.take_snapshot(volume, name)

    @work(group="snapshot", exit_on_error=False)
    async def take_snapshot(self, volume: str, name: str) -> None:
        cluster = self.session.cluster
        snap = await self._call(f"snapshot {volume}", cluster.snapshot(volume, name))
        if snap is not None:
            self.notify(f"{snap.name}: {snap.files} files of {volume}", title="snapshot taken")
            self.refresh_storage()

    @work(group="compare", exclusive=True, exit_on_error=False)
    async def compare(self, a: str, b: str) -> None:
        from tui.screens.compare import CompareScreen

        cluster = self.session.cluster
        snaps = []
        for name in (a, b):
            snap = self.ckpt_panel.snapshots.get(name)
            if snap is None:
                self.notify(f"snapshot {name} is gone", severity="warning")
                return
            if not snap.metrics:
                metrics = await self._call(f"read metrics of {name}", cluster.read_metrics(snapshot=name))
                if metrics:
                    snap = snap.model_copy(update={"metrics": metrics})
            snaps.append(snap)
        await self.app.push_screen(CompareScreen(*snaps))

    # ------------------------------------------------------------------ guarded backend calls

    async def _call(self, what: str, awaitable, ok: bool = False):
        """Await a backend call; a user error becomes a notification and None."""
        try:
            result = await awaitable
        except USER_ERRORS as exc:
            self.notify(one_line(exc), title=f"could not {what}", severity="error")
            return None
        return True if ok and result is None else result

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

    # ------------------------------------------------------------------ actions (see tui/actions.py)

    def action_run_step(self) -> None:
        if self.checklist.step_id is not None:
            self._start_step(self.checklist.step_id)

    def action_verify_step(self) -> None:
        if self.checklist.step_id is not None:
            self.verify_step(self.checklist.step_id)

    def action_next_step(self) -> None:
        self.checklist.move(+1)

    def action_previous_step(self) -> None:
        self.checklist.move(-1)

    def action_kill_pod(self) -> None:
        if not self.panels.is_shown("pods"):  # never kill a pod the learner cannot see
            self.panels.show("pods")
            self.notify("pick the pod to kill, then ctrl+k again", title="pods")
            return
        pod = self.pods_table.selected_pod
        if pod is None or self.pods_table.is_history(pod):
            self.notify("no running pod selected: pick one in the pods panel", severity="warning")
            return
        if not self.app.config.confirm_kill:  # loaded before the panels: kill needs them
            self.kill_pod(pod)
            return
        from tui.screens.confirm import ConfirmScreen

        self.app.push_screen(
            ConfirmScreen(f"Kill pod {pod}?", "Its group restarts with restart attempt + 1 and "
                          "resumes from the newest valid checkpoint.", yes="Kill"),
            lambda yes: self._kill_confirmed(pod, yes))

    def action_show_logs(self) -> None:
        if self.panels.panel_of(self.app.focused) == "pods" and self.pods_table.selected_pod is not None:
            self.log_view.show_pod(self.pods_table.selected_pod)
        self.panels.show("logs")

    def action_filter_logs(self) -> None:
        self.panels.show("logs", focus=False)
        self.log_view.focus_filter()

    def action_toggle_follow(self) -> None:
        self.log_view.toggle_follow()

    def action_snapshot(self) -> None:
        volume = self.ckpt_panel.volume
        if volume is None and self.followed in self.jobs and self.jobs[self.followed].volumes:
            volume = self.jobs[self.followed].volumes[0]
        if volume is None:
            self.notify("no volume yet: a training step creates one", severity="warning")
            return
        from tui.screens.prompt import PromptScreen

        default = f"{volume}-{time.strftime('%H%M%S', time.localtime(self.clock()))}"
        self.app.push_screen(
            PromptScreen(f"Snapshot volume {volume} as", default[:63]),
            lambda name: self._snapshot_named(volume, name))

    def action_compare(self) -> None:
        pair = self.ckpt_panel.compare_pair()
        if pair is None:
            self.notify("compare needs two snapshots: take them with s", severity="warning")
            self.panels.show("checkpoints")
            return
        self.compare(*pair)

    def action_pick_job(self) -> None:
        if not self.jobs:
            self.notify("no jobs yet: run a training step", severity="warning")
            return
        from tui.screens.pick_job import PickJobScreen

        def chosen(name: str | None) -> None:
            if name:
                self.follow(name, by_user=True)

        self.app.push_screen(PickJobScreen(list(self.jobs.values()), self.followed), chosen)

    def action_refresh(self) -> None:
        if self.session.lesson is not None:
            self._refresh_states()
            self.refresh_storage()

    def action_show_tab(self, tab: str) -> None:
        self.panels.show(tab)

    def action_zoom(self) -> None:
        """The focused panel fills the body (the checklist's focus zooms the step card)."""
        panels = self.panels
        name = panels.panel_of(self.app.focused) or panels.zoomed or (
            panels.active if panels.arrangement == "tabs" else "step")
        panels.toggle_zoom(name)
        self.set_class(panels.zoomed is not None, "-zoomed")

    def action_toggle_checklist(self) -> None:
        hidden = not self.has_class("-no-checklist")
        self.set_class(hidden, "-no-checklist")
        if hidden and self.app.focused is self.checklist:
            self.panels.focus_panel(self.panels.shown()[0])

    def _tick_running(self) -> None:
        """A long step shows it is alive: the job bar counts its seconds."""
        if self.running_step is not None and self._step_started is not None:
            self.job_bar.running_for = self.clock() - self._step_started

    def action_toggle_theme(self) -> None:
        self.app.action_toggle_theme()

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        self.app.push_screen(HelpScreen())

    def action_quit(self) -> None:
        if self.running_step is None:
            self.app.exit()
            return
        from tui.screens.confirm import ConfirmScreen

        self.app.push_screen(
            ConfirmScreen(f"Step {self.running_step} is running. Quit?",
                          "Its job keeps running; press v on the step later to check it.", yes="Quit"),
            lambda yes: self.app.exit() if yes else None)

    # ------------------------------------------------------------------ the command palette

    def commands(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        """(title, help, callback) for every action, step and job: the palette lists them all."""
        for a in actions.ACTIONS:
            yield a.title, a.help, (lambda name=a.action: self.run_action(name))
        lesson = self.session.lesson
        for step in (lesson.steps if lesson is not None else []):
            yield (f"Go to {step.label}: {step.title}", step.done_when,
                   lambda sid=step.id: self.checklist.select_step(sid))
        for job in sorted(self.jobs.values(), key=lambda j: j.created, reverse=True):
            yield (f"Follow job {job.name}", f"{job.phase.value}, {job.num_nodes} nodes",
                   lambda name=job.name: self.follow(name, by_user=True))


def _job_gone(exc: BaseException) -> bool:
    """NotFound: the job was deleted; watching it again cannot help."""
    return isinstance(exc, NotFound)
