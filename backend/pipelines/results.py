"""What a pipeline run reports, as it happens (`PipelineEvent`) and at the end (`PipelineRunResult`).

The same shapes for both platforms: kfp.local on the embedded cluster and a Pipelines endpoint on
Kubernetes, so the lesson engine and the cockpit never ask where a pipeline ran.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field


class TaskState(str, Enum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SKIPPED = "Skipped"  # never started because an upstream task failed

    @property
    def finished(self) -> bool:
        return self in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.SKIPPED)


EventKind = Literal["pipeline-started", "task-started", "task-log", "task-finished",
                    "pipeline-finished", "note"]


class PipelineEvent(BaseModel):
    """One thing that happened during a run; `on_event` callbacks receive these in order."""

    kind: EventKind
    task: str = ""
    text: str = ""
    state: TaskState | None = None
    at: float = Field(default_factory=time.time)


OnEvent = Callable[[PipelineEvent], None]


class TaskOutcome(BaseModel):
    name: str
    state: TaskState = TaskState.PENDING
    started: float | None = None
    finished: float | None = None
    outputs: dict[str, Any] = Field(default_factory=dict)
    # What the component printed, without the KFP executor's own chatter.
    logs: list[str] = Field(default_factory=list)
    pod: str = ""  # on a cluster: the pod that ran it (`kubectl logs` it)
    error: str = ""


class PipelineRunResult(BaseModel):
    pipeline: str
    backend: Literal["local", "kube"]
    file: str  # the compiled pipeline that ran
    run_id: str
    state: TaskState
    tasks: list[TaskOutcome] = Field(default_factory=list)
    arguments: dict[str, Any] = Field(default_factory=dict)
    started: float
    finished: float | None = None
    # Where to look further: the kfp.local output directory, or the run's page on the endpoint.
    location: str = ""
    # What the platform did not do and why (e.g. kfp.local ignores resources and mounts).
    notes: list[str] = Field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.state == TaskState.SUCCEEDED

    def task(self, name: str) -> TaskOutcome:
        """The outcome of a task by its name in the pipeline (e.g. "train-job"); KeyError if absent."""
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task {name!r} in run {self.run_id} (tasks: "
                       f"{', '.join(t.name for t in self.tasks) or 'none'})")

    def output(self, task: str, key: str = "Output") -> Any:
        return self.task(task).outputs[key]
