"""Lesson progress and notes on disk, in the settings' workspace.

    <workspace>/progress.json      every step's status and last evidence
    <workspace>/notes/<step>.md    the learner's notes
    <workspace>/runs/<step>/       what a step's run left behind (logs) for its verify to read

Every write goes to a temp file that is fsynced and renamed, so a killed process or a dropped SSH
session leaves the old file or the new one, never half of one. The cockpit and a headless
`kfcockpit lesson` may share a workspace: updates of progress.json hold an flock while they read,
change and replace it, so neither loses the other's step.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ValidationError

from backend.models import Evidence
from training.atomic import write_atomic

PROGRESS_FILE = "progress.json"


class StepStatus(str, Enum):
    TODO = "todo"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class StepState(BaseModel):
    status: StepStatus = StepStatus.TODO
    evidence: Evidence | None = None
    updated: float | None = None
    pid: int | None = None  # the process running the step, while RUNNING




def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProgressStore:
    def __init__(self, workspace: Path):
        self.workspace = workspace
        self.path = workspace / PROGRESS_FILE
        self.notes_dir = workspace / "notes"

    def run_dir(self, step_id: str) -> Path:
        return self.workspace / "runs" / f"step-{step_id}"

    # ------------------------------------------------------------------ states

    def load(self) -> dict[str, StepState]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            # Unreadable progress must not stop the lesson; keep the file for a human to look at.
            self._set_aside()
            return {}
        states: dict[str, StepState] = {}
        for step_id, value in (raw.get("steps") or {}).items():
            try:
                states[step_id] = self._settle(StepState.model_validate(value))
            except ValidationError:
                continue
        return states

    def _settle(self, state: StepState) -> StepState:
        """A RUNNING step whose process is gone was interrupted: say so instead of spinning forever."""
        if state.status is StepStatus.RUNNING and (state.pid is None or not _alive(state.pid)):
            return StepState(status=StepStatus.FAILED, updated=state.updated, evidence=Evidence(
                ok=False, checked="the step's run", at=state.updated,
                seen="the run was interrupted before it finished; run the step again or verify it"))
        return state

    def _set_aside(self) -> None:
        try:
            os.replace(self.path, self.path.with_name(f"{PROGRESS_FILE}.unreadable-{int(time.time())}"))
        except OSError:
            pass

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.workspace.mkdir(parents=True, exist_ok=True)
        with open(self.workspace / ".progress.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, states: dict[str, StepState]) -> None:
        data = {"version": 1, "steps": {k: v.model_dump(mode="json") for k, v in states.items()}}
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def put(self, step_id: str, state: StepState) -> None:
        with self._locked():
            states = self.load()
            states[step_id] = state
            self._write(states)

    def clear(self, step_id: str | None = None) -> None:
        with self._locked():
            states = self.load()
            if step_id is None:
                states = {}
            else:
                states.pop(step_id, None)
            self._write(states)

    # ------------------------------------------------------------------ notes

    def note_path(self, step_id: str) -> Path:
        return self.notes_dir / f"{step_id}.md"

    def note(self, step_id: str) -> str:
        try:
            return self.note_path(step_id).read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    def save_note(self, step_id: str, text: str) -> None:
        write_atomic(self.note_path(step_id), text)
