"""What a step's run action and verify receive, and what they hand back.

Each step has a `Handler`: an optional `run` (an async generator of RunUpdates: progress lines, the
TrainJob it started) and a `verify` that reads real evidence (logs, pod records, files on the
volume, snapshots, metrics) through the Cluster protocol and returns Evidence. `unavailable` says
in one line why the step cannot run here (no cluster to run it on, or not on this platform).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, Literal

from pydantic import BaseModel

from backend.cluster import Capabilities, Cluster, ClusterError
from backend.connect import capabilities
from backend.lesson.steps import Step
from backend.models import Evidence
from backend.settings import Settings


class LessonError(ClusterError):
    """Unknown step, a step run out of order, a bad note: one line saying what to do."""


class RunUpdate(BaseModel):
    kind: Literal["line", "job", "evidence"]
    text: str = ""  # "line": a progress or output line to show
    job: str | None = None  # "job": the TrainJob the step just started (the TUI follows its pods)
    evidence: Evidence | None = None  # "evidence": the verify result, always the last update


def line(text: str) -> RunUpdate:
    return RunUpdate(kind="line", text=text)


def job_started(name: str) -> RunUpdate:
    return RunUpdate(kind="job", job=name, text=f"TrainJob {name} submitted")


@dataclass
class StepContext:
    step: Step
    settings: Settings
    cluster: Cluster | None
    run_dir: Path  # where this step keeps what its run leaves behind
    note: Callable[[str], str]  # step id -> the learner's note ("" when none)
    save_note: Callable[[str, str], None]
    unreachable: str | None = None  # why there is no cluster, when it did not answer
    # A person watches the run (the cockpit) and can act in it: a step may hand them its moment
    # (step 6 waits for the learner's kill). Headless (`kfcockpit lesson run`) does it itself.
    interactive: bool = False

    @property
    def capabilities(self) -> Capabilities:
        """What the platform can do (a fresh cluster, pipelines on this machine, ...)."""
        if self.cluster is not None:
            return self.cluster.capabilities
        return capabilities(self.settings)

    def require_cluster(self) -> Cluster:
        if self.cluster is None:
            raise ClusterError(missing_cluster(self.settings, self.unreachable))
        return self.cluster

    def evidence(self, ok: bool, seen: str, details: list[str] | None = None,
                 checked: str | None = None) -> Evidence:
        return Evidence(ok=ok, checked=checked or self.step.done_when, seen=seen,
                        details=details or [], at=time.time())


def missing_cluster(settings: Settings, unreachable: str | None = None) -> str:
    if unreachable:
        return f"cannot run here: the step needs the cluster, and it does not answer: {unreachable}"
    return f"cannot run here: the step needs {capabilities(settings).description}, and none is connected"


RunAction = Callable[[StepContext], AsyncIterator[RunUpdate]]
Verify = Callable[[StepContext], Awaitable[Evidence]]


def always_available(ctx: StepContext) -> str | None:
    return None


def needs_cluster(ctx: StepContext) -> str | None:
    return missing_cluster(ctx.settings, ctx.unreachable) if ctx.cluster is None else None


@dataclass(frozen=True)
class Handler:
    verify: Verify
    run: RunAction | None = None  # None: the step is done by a note, or by the verify alone
    unavailable: Callable[[StepContext], str | None] = always_available
