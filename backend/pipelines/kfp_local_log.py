"""Turn what kfp.local prints while it runs a pipeline into `PipelineEvent`s.

kfp.local (kfp 2.17, pinned) reports on stdout, one line each:
    15:10:09.069 - INFO - Executing task 'print-inputs'
    15:10:09.069 - INFO - Streamed logs:
        <every line the task printed, indented by four spaces>
    15:10:09.135 - INFO - Task 'print-inputs' finished with status SUCCESS
    15:10:09.201 - INFO - Pipeline 'hello' finished with status SUCCESS
(names and statuses wrapped in ANSI colours). This is kfp.local's only progress report, so the
parser follows that format; a test runs real kfp.local and checks the events it yields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from backend.pipelines.results import PipelineEvent, TaskState
from backend.pipelines.task_log import TaskLogFilter

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOGGER = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} - (?:INFO|WARNING|ERROR|CRITICAL) - (.*)$")
_EXECUTING = re.compile(r"^Executing task '(.+)'$")
_TASK_DONE = re.compile(r"^Task '(.+)' finished with status (SUCCESS|FAILURE)$")
_PIPELINE_START = re.compile(r"^Running pipeline: '(.+)'$")
_PIPELINE_DONE = re.compile(r"^Pipeline '(.+)' finished with status (SUCCESS|FAILURE)(.*)$")
_STATES = {"SUCCESS": TaskState.SUCCEEDED, "FAILURE": TaskState.FAILED}


@dataclass
class KfpLocalLog:
    """Feed lines in order with `feed`; each returns the events that line produced."""

    task: str = ""  # the task whose output is streaming now
    streaming: bool = False
    pipeline_state: TaskState | None = None
    failure: str = ""
    _filter: TaskLogFilter = field(default_factory=TaskLogFilter)

    def feed(self, raw: str) -> list[PipelineEvent]:
        line = _ANSI.sub("", raw.rstrip("\n"))
        logged = _LOGGER.match(line)
        if logged:
            return self._logger_line(logged.group(1))
        if self.streaming and line.startswith("    "):
            return self._task_line(line[4:])
        return []  # separators, output summaries, blank lines between tasks

    def _logger_line(self, text: str) -> list[PipelineEvent]:
        if m := _EXECUTING.match(text):
            self.task, self.streaming = m.group(1), False
            return [PipelineEvent(kind="task-started", task=self.task, state=TaskState.RUNNING)]
        if text == "Streamed logs:":
            self.streaming, self._filter = True, TaskLogFilter()
            return []
        if m := _TASK_DONE.match(text):
            self.streaming = False
            return [PipelineEvent(kind="task-finished", task=m.group(1), state=_STATES[m.group(2)])]
        if m := _PIPELINE_START.match(text):
            return [PipelineEvent(kind="pipeline-started", text=m.group(1))]
        if m := _PIPELINE_DONE.match(text):
            self.pipeline_state = _STATES[m.group(2)]
            self.failure = m.group(3).lstrip(". ").strip()
            return [PipelineEvent(kind="pipeline-finished", text=m.group(1), state=self.pipeline_state)]
        return []

    def _task_line(self, text: str) -> list[PipelineEvent]:
        return [PipelineEvent(kind="task-log", task=self.task, text=shown) for shown in self._filter.feed(text)]
