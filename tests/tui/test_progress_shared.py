"""The cockpit and a headless `kfcockpit lesson` share the lesson's workspace (progress.py): a step
the other one saves shows in the checklist and the step card as it is saved, without ctrl+r, and a
note being written in the cockpit meanwhile is left as it is."""

from __future__ import annotations

import sys
import time

import pytest

from backend.lesson.progress import ProgressStore, StepState, StepStatus
from backend.models import Evidence
from backend.settings import Settings
from tests.tui.conftest import make_app, wait_until


def _done(step: str) -> StepState:
    return StepState(status=StepStatus.DONE, updated=time.time(),
                     evidence=Evidence(ok=True, checked="elsewhere", seen=f"step {step} done in another terminal"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="no inotify: the cockpit refreshes on ctrl+r")
async def test_a_step_saved_by_another_process_shows_at_once_and_a_typed_note_stays(home):
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: bool(screen.checklist.steps), "the checklist")
        await pilot.press("enter")  # setup 1 is a reading step: enter writes its note
        note = screen.step_view.query_one("#step-note")
        await pilot.press(*"half a thought")
        other = ProgressStore(Settings(home=home).workspace)  # as `kfcockpit lesson run 3` saves it
        other.put("3", _done("3"))
        await wait_until(screen, lambda: screen.checklist.status.get("3") == "done", "step 3 done in the checklist")
        other.put("setup-1", _done("setup-1"))
        await wait_until(screen, lambda: "done" in str(screen.step_view.query_one("#step-heading").render()),
                         "the shown step's card to say done")
        assert "half a thought" in note.text  # the note being written is not reloaded
