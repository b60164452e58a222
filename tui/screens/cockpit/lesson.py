"""Driving the lesson from the cockpit: the checklist and the step card shown from the engine's
states, a step run (its output into the step card, the job it starts followed) or verified, the
learner's notes saved, and the running step's seconds in the job bar.

A step that needs the cluster, asked for before the cluster has answered, is refused with "still
connecting" and nothing is saved (see ARCHITECTURE.md, "The cockpit").
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING

from backend.errors import USER_ERRORS, one_line
from training.logfmt import step_and_loss
from tui.screens.cockpit.messages import FollowJob
from tui.screens.cockpit.part import Part

if TYPE_CHECKING:
    from backend.models import Evidence


class LessonDriver(Part):
    def __init__(self, screen) -> None:
        super().__init__(screen)
        self.running_step: str | None = None
        self._step_started: float | None = None

    # ------------------------------------------------------------------ showing it

    def show_lesson(self) -> None:
        lesson = self.screen.session.lesson
        checklist = self.screen.checklist
        if checklist.steps:  # already shown: keep the learner's place
            self.refresh_states()
            return
        checklist.set_steps(lesson.steps, lesson.states())
        self.run(self._follow_progress, group="progress")
        self.changed("steps")

    def show_step(self, step_id: str) -> None:
        lesson = self.screen.session.lesson
        if lesson is None:
            return
        step = lesson.step(step_id)
        try:
            note = lesson.note_with_measurement(step_id) if step.takes_note else ""
        except (OSError, ValueError) as exc:  # unreadable note file: the learner can fix it
            self.notify(one_line(exc), title=f"note of {step.label}", severity="error")
            note = ""
        self.screen.step_view.show(step, lesson.state(step_id), note, running=step_id == self.running_step)
        if step.takes_note and not note:
            # a function, not a coroutine: replaced before it starts (the learner moved on), it
            # leaves no coroutine unawaited
            self.run(partial(self._load_draft, step_id), group="draft", exclusive=True)

    async def _load_draft(self, step_id: str) -> None:
        """A reading step with no note yet starts from the engine's draft (headings, prompts and,
        for step 10, the measured runs); an untouched draft does not pass the check."""
        try:
            text = await self.screen.session.lesson.draft_note(step_id)
        except USER_ERRORS as exc:
            self.notify(one_line(exc), title="no draft for the note", severity="warning")
            return
        self.screen.step_view.offer_draft(step_id, text)
        self.changed("draft")

    def _saved_states(self) -> dict:
        states = self.screen.session.lesson.states()
        if self.running_step is not None:  # our own run is live whatever the file says
            states.pop(self.running_step, None)
        return states

    def refresh_states(self) -> None:
        checklist = self.screen.checklist
        checklist.set_states(self._saved_states())
        if checklist.step_id is not None:
            self.show_step(checklist.step_id)
        self.changed("steps")

    async def _follow_progress(self) -> None:
        """A `kfcockpit lesson` in another terminal shares the workspace: the steps it saves show
        here as the store replaces the progress file, not at the next ctrl+r. Where the kernel has
        no inotify, ctrl+r it is."""
        from backend.inotify import FileWatcher

        path = self.screen.session.lesson.store.path
        replaced = asyncio.Event()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            files = FileWatcher()
        except OSError:
            return
        try:
            files.watch_replaced(path, replaced.set)
            while True:
                await replaced.wait()
                replaced.clear()
                self._progress_replaced()
        finally:
            files.close()

    def _progress_replaced(self) -> None:
        states = self._saved_states()
        checklist = self.screen.checklist
        checklist.set_states(states)
        if checklist.step_id is not None and checklist.step_id != self.running_step:
            self.screen.step_view.show_state(states.get(checklist.step_id))
        self.changed("steps")

    def tick(self) -> None:
        """A long step shows it is alive: the job bar counts its seconds."""
        if self.running_step is not None and self._step_started is not None:
            self.screen.job_bar.running_for = self.screen.clock() - self._step_started

    # ------------------------------------------------------------------ notes

    def save_note(self, step_id: str, text: str, failed: str = "note not kept") -> bool:
        """Save through the engine; a refused note (too long) or a full disk is a notification."""
        try:
            self.screen.session.lesson.save_note(step_id, text)
        except (*USER_ERRORS, OSError) as exc:
            self.notify(one_line(exc), title=failed, severity="error")
            return False
        return True

    def keep_note_now(self, step_id: str, text: str) -> None:
        """Called by the step view as it unmounts (quitting): no message would be handled then."""
        if self.screen.session.lesson is not None:
            self.save_note(step_id, text)

    def note_saved(self, step_id: str, text: str) -> None:
        """ctrl+s in the note: save it, then check it."""
        if self.save_note(step_id, text, "note not saved"):
            self.notify("note saved; checking it", title=self.screen.session.lesson.step(step_id).label)
            self.verify(step_id)

    # ------------------------------------------------------------------ run and verify

    def start(self, step_id: str) -> None:
        """Run a step (enter): a reading step is done by its note, so that gets the focus instead."""
        lesson = self.screen.session.lesson
        if lesson is None or self._still_connecting(step_id):
            return
        if self.running_step is not None:
            self.notify(f"step {self.running_step} is still running; its result comes first",
                        severity="warning")
            return
        step = lesson.step(step_id)
        if step.kind == "reading":
            self.edit_note(step_id)
            return
        self.run(self._run_step(step_id), group="step-run")

    def measure(self, step_id: str) -> None:
        """What a step's note cites, measured in the cockpit (step 10: `kfcockpit compare`): its
        lines in the step card, its jobs followed as they come, its table quoted in the note."""
        lesson = self.screen.session.lesson
        if lesson is None or self._still_connecting(step_id):
            return
        if self.running_step is not None:
            self.notify(f"step {self.running_step} is still running; its result comes first",
                        severity="warning")
            return
        self.screen.checklist.select_step(step_id)
        self.run(self._measure(step_id), group="step-run")

    async def _measure(self, step_id: str) -> None:
        from backend.compare.observer import ObservationError

        step = self.screen.session.lesson.step(step_id)
        self._begin(step_id, f"$ {step.measure}: the Trainer side, then the Ray side (a few minutes)")
        step_view = self.screen.step_view
        try:
            await self.screen.session.lesson.measure(step_id, lambda text: step_view.add_output(step_id, text))
            step_view.add_output(step_id, "measured: the table is quoted in your note")
            self.notify("measured: the table is quoted in your note", title=step.label)
        except (*USER_ERRORS, ObservationError) as exc:
            step_view.add_output(step_id, f"error: {one_line(exc)}")
            self.notify(one_line(exc), title=f"{step.label}: {step.measure}", severity="error")
        finally:
            self._end()

    def edit_note(self, step_id: str) -> None:
        """Into the step's note (enter on a reading step, e on any step with a note)."""
        step = self.screen.session.lesson.step(step_id)
        if not step.takes_note:
            self.notify(f"{step.label} is done by its run, not by a note: enter runs it", severity="warning")
            return
        self.screen.panels.show("step", focus=False)
        self.screen.step_view.focus_note()
        self.notify("write your note, then ctrl+s saves and checks it", title=step.label)

    def _begin(self, step_id: str, first_line: str) -> None:
        """A step's run (or measurement) starts: its card and the job bar say so."""
        screen = self.screen
        step = screen.session.lesson.step(step_id)
        self.running_step = step_id
        self._step_started = screen.clock()
        screen.job_bar.running_for = 0.0
        screen.job_bar.running_step = step.label
        screen.checklist.set_status(step_id, "running")
        screen.step_view.clear_output(step_id)
        screen.step_view.add_output(step_id, first_line)
        if screen.checklist.step_id == step_id:
            # the card stays at its head, whose newest line is the run's: scrolled to the output
            # box below, a card in few rows lost the call to action
            self.show_step(step_id)

    def _end(self) -> None:
        self.running_step = None
        self.screen.job_bar.running_step = None
        self.refresh_states()

    async def _run_step(self, step_id: str) -> None:
        screen = self.screen
        lesson = screen.session.lesson
        step = lesson.step(step_id)
        step_view = screen.step_view
        self._begin(step_id, f"$ run {step.label}: {step.title}")
        try:
            async for update in lesson.run(step_id):
                if update.kind == "line":
                    step_view.add_output(step_id, update.text)
                    self._plot(step.label, update.text)
                elif update.kind == "job" and update.job:
                    step_view.add_output(step_id, f"following job {update.job}")
                    screen.post_message(FollowJob(update.job))
                elif update.kind == "evidence" and update.evidence is not None:
                    self._announce(step.label, update.evidence)
        except USER_ERRORS as exc:
            step_view.add_output(step_id, f"error: {one_line(exc)}")
            self.notify(one_line(exc), title=step.label, severity="error")
        finally:
            self._end()

    def _plot(self, label: str, text: str) -> None:
        """A run that trains where no job is followed (step 3's torchrun on this machine): its
        rank-0 step lines go to the loss chart as a run of their own."""
        point = step_and_loss(text)
        if point is not None and " rank=0" in text:
            self.screen.loss_chart.add_point(f"{label} run", *point, at=self.screen.clock())

    def verify(self, step_id: str):
        return self.run(self._verify(step_id), group="step-verify")

    async def _verify(self, step_id: str) -> None:
        lesson = self.screen.session.lesson
        try:
            if lesson is None or self._still_connecting(step_id):
                return
            evidence = await lesson.verify(step_id)
            self._announce(lesson.step(step_id).label, evidence)
            self.refresh_states()
        except USER_ERRORS as exc:
            self.notify(one_line(exc), title=f"verify {step_id}", severity="error")
        finally:
            self.changed("verified")

    def _announce(self, label: str, evidence: "Evidence") -> None:
        if evidence.ok:
            self.notify(evidence.seen, title=f"{label} done ✔")
        else:
            self.notify(evidence.seen, title=f"{label} not done yet ✘", severity="warning")

    def _still_connecting(self, step_id: str) -> bool:
        """A step that needs the cluster, asked for before it has answered: say so, and touch
        nothing (a check now would only find the cluster missing)."""
        session = self.screen.session
        lesson = session.lesson
        if session.cluster is not None or lesson.unavailable(step_id) is None:
            return False
        self.notify("still connecting to the cluster: try again once the top bar says connected",
                    title=lesson.step(step_id).label, severity="warning")
        return True
