"""The lesson engine: the steps, their state, running and verifying them, the learner's notes.

The TUI and `kfcockpit lesson` both drive a `Lesson`. State lives in the settings' workspace, so
quitting, a crash or a dropped SSH session loses nothing. No torch, ray, kfp or kubernetes is
imported here: steps that need them start them in other processes or import them when they run.
"""

from __future__ import annotations

import os
import time
from typing import AsyncIterator, Callable

from backend.anatomy.model import Anatomy
from backend.cluster import Cluster, ClusterError, Unavailable
from backend.lesson import anatomy_seen
from backend.lesson.context import LessonError, RunUpdate, StepContext
from backend.lesson.drafts import draft, with_measurement
from backend.lesson.handlers import HANDLERS
from backend.lesson.progress import ProgressStore, StepState, StepStatus
from backend.lesson.reading import note_command
from backend.lesson.steps import STEP_IDS, STEPS, Step, normalise_id
from backend.models import Evidence
from backend.settings import Settings

__all__ = ["Lesson", "LessonError", "RunUpdate", "StepState", "StepStatus", "Step"]

MAX_NOTE_BYTES = 64 * 1024


class Lesson:
    def __init__(self, cluster: Cluster | None, settings: Settings, unreachable: str | None = None,
                 interactive: bool = False):
        # cluster is None before one is connected (the cockpit's first moments, tests of steps
        # that need none) or, with `unreachable` saying why, when the platform did not answer:
        # steps that need it say so in their evidence, and their saved progress is left alone.
        self.cluster = cluster
        self.unreachable = unreachable
        self.interactive = interactive  # see StepContext.interactive
        self.settings = settings
        self.steps: list[Step] = list(STEPS)
        self._by_id = {s.id: s for s in self.steps}
        self.store = ProgressStore(settings.workspace)

    # ------------------------------------------------------------------ the steps and their state

    def step(self, step_id: str) -> Step:
        found = self._by_id.get(normalise_id(step_id))
        if found is None:
            raise LessonError(f"unknown step {step_id!r}: the steps are {', '.join(STEP_IDS)} "
                              "(kfcockpit lesson list)")
        return found

    def state(self, step_id: str) -> StepState:
        return self.store.load().get(self.step(step_id).id, StepState())

    def states(self) -> dict[str, StepState]:
        saved = self.store.load()
        return {s.id: saved.get(s.id, StepState()) for s in self.steps}

    def unavailable(self, step_id: str) -> str | None:
        """Why the step cannot run here (machinery missing, wrong platform), or None."""
        step = self.step(step_id)
        return HANDLERS[step.id].unavailable(self._context(step))

    def runnable(self, step_id: str) -> bool:
        """An action step that can run on this platform now (reading steps are notes)."""
        step = self.step(step_id)
        return step.kind == "action" and self.unavailable(step.id) is None

    def blocked_by(self, step_id: str) -> Step | None:
        """The first step this one needs that is not done yet."""
        states = self.store.load()
        for need in self.step(step_id).needs:
            if states.get(need, StepState()).status is not StepStatus.DONE:
                return self._by_id[need]
        return None

    def _context(self, step: Step) -> StepContext:
        return StepContext(step=step, settings=self.settings, cluster=self.cluster,
                           run_dir=self.store.run_dir(step.id), note=self.store.note,
                           save_note=self.store.save_note, unreachable=self.unreachable,
                           interactive=self.interactive)

    # ------------------------------------------------------------------ run and verify

    def run(self, step_id: str) -> AsyncIterator[RunUpdate]:
        """Do the step's action, then verify it. The last update is always the evidence.
        Raises LessonError at once (before anything starts) for an unknown or out-of-order step."""
        step = self.step(step_id)
        self.check_order(step.id)
        return self._run(step)

    def check_order(self, step_id: str) -> None:
        """LessonError saying what to do first, when a step this one needs is not done."""
        step = self.step(step_id)
        first = self.blocked_by(step.id)
        if first is not None:
            how = (note_command(first.id) if first.kind == "reading"
                   else f"kfcockpit lesson run {first.id}")
            raise LessonError(f"do {first.label} first: {first.title} ({how}); "
                              f"{step.label} needs it")

    async def _run(self, step: Step) -> AsyncIterator[RunUpdate]:
        handler = HANDLERS[step.id]
        ctx = self._context(step)
        reason = handler.unavailable(ctx)
        if reason is not None:  # nothing can start here: say why, and keep what was saved
            yield RunUpdate(kind="evidence", evidence=ctx.evidence(False, reason))
            return
        before = self.store.load().get(step.id)
        self.store.put(step.id, StepState(status=StepStatus.RUNNING, updated=time.time(),
                                          pid=os.getpid()))
        evidence: Evidence | None = None
        try:
            if handler.run is not None:
                async for update in handler.run(ctx):
                    yield update
            evidence = await handler.verify(ctx)
        except ClusterError as exc:
            evidence = ctx.evidence(False, str(exc))
        finally:
            if evidence is not None:
                self._record(step, evidence)
            else:
                self._stopped(step, ctx, before)
        yield RunUpdate(kind="evidence", evidence=evidence)

    def _stopped(self, step: Step, ctx: StepContext, before: StepState | None) -> None:
        """Closed early (the cockpit quit, Ctrl-C) or a bug: the run proves nothing either way. A
        step done before stays done (its evidence was read from the platform and still holds; the
        job this run started may well still be training); any other is failed, saying so."""
        if before is not None and before.status is StepStatus.DONE:
            self.store.put(step.id, before)
        else:
            self._record(step, ctx.evidence(False, "the run was stopped before it finished",
                                            checked="the step's run"))

    async def verify(self, step_id: str) -> Evidence:
        """Check the step's "done when" now, from real evidence; the result is kept. A verify that
        could not look (no cluster yet, or it does not answer) keeps what was saved: its evidence
        says why, and a done step does not turn failed because the platform was away."""
        step = self.step(step_id)
        handler = HANDLERS[step.id]
        ctx = self._context(step)
        reason = handler.unavailable(ctx)
        if reason is not None:
            return ctx.evidence(False, reason)
        try:
            evidence = await handler.verify(ctx)
        except Unavailable as exc:
            return ctx.evidence(False, str(exc))
        except ClusterError as exc:
            evidence = ctx.evidence(False, str(exc))
        current = self.store.load().get(step.id)
        if current is None or current.status is not StepStatus.RUNNING:  # never hide a live run
            self._record(step, evidence)
        return evidence

    def _record(self, step: Step, evidence: Evidence) -> None:
        if evidence.at is None:
            evidence.at = time.time()
        status = StepStatus.DONE if evidence.ok else StepStatus.FAILED
        self.store.put(step.id, StepState(status=status, evidence=evidence, updated=evidence.at))

    # ------------------------------------------------------------------ notes and reset

    def note(self, step_id: str) -> str:
        return self.store.note(self.step(step_id).id)

    async def draft_note(self, step_id: str) -> str:
        """What a note editor opens with: the saved note, else a template to fill in (setup 1
        records the platform; step 7's is filled by its run; step 10's from measured runs)."""
        step = self.step(step_id)
        return self.store.note(step.id) or await draft(self._context(step))

    async def measure(self, step_id: str, progress: Callable[[str], None]) -> str:
        """What the step's note cites, measured now (step 10: `kfcockpit compare`, a TrainJob and
        a RayJob on the embedded cluster), then its note with the table quoted; returns the note."""
        from backend.compare import run_comparison

        step = self.step(step_id)
        if step.measure is None:
            raise LessonError(f"{step.label} has nothing to measure")
        await run_comparison(self.settings, progress=progress)
        return self.note_with_measurement(step.id)

    def note_with_measurement(self, step_id: str) -> str:
        """The step's note with the newest measurement quoted where it asks for one (saved when
        that changed it): a `kfcockpit compare` run from a shell shows up in an open note too."""
        step = self.step(step_id)
        note = self.note(step.id)
        if step.measure is None or not note.strip():
            return note  # an unwritten note opens as a draft, which quotes the newest already
        updated = with_measurement(note, self._context(step))
        if updated != note:
            self.save_note(step.id, updated)
        return updated

    def saw_anatomy(self, anatomy: Anatomy) -> None:
        """The learner looked at a job's anatomy: step 2's verify cites it (anatomy_seen.py)."""
        anatomy_seen.keep(self.store.run_dir(anatomy_seen.STEP), anatomy)

    def save_note(self, step_id: str, text: str) -> None:
        step = self.step(step_id)
        if len(text.encode("utf-8")) > MAX_NOTE_BYTES:
            raise LessonError(f"the note for {step.label} is longer than {MAX_NOTE_BYTES // 1024} KiB; "
                              "keep it short")
        self.store.save_note(step.id, text)

    def reset(self, step_id: str | None = None) -> None:
        """Forget the progress of one step or of all; notes and run logs are kept."""
        self.store.clear(None if step_id is None else self.step(step_id).id)
