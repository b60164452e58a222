"""A task's log as people read it: what the component printed, without the machinery's lines.

A task's raw output also holds KFP's executor chatter (`[KFP Executor ...]` lines and its JSON
dump of the inputs), on a cluster the KFP launcher's glog lines, and one line our components
print for machines: `kfcockpit-outputs {json}`, the task's outputs. On a cluster that line is how
a run learns them (the Pipelines API returns no parameter outputs); kfp.local writes them to files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

OUTPUTS_MARKER = "kfcockpit-outputs "
_EXECUTOR_CHATTER = re.compile(r"^\[KFP Executor [^\]]*\]:")
_GLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]+\] ")


def outputs_line(outputs: dict[str, Any]) -> str:
    return OUTPUTS_MARKER + json.dumps(outputs, sort_keys=True)


@dataclass
class TaskLogFilter:
    """Feed a task's raw lines in order; `feed` returns the lines people should see (trailing
    blank lines are held back until more text follows) and `outputs` collects the outputs line."""

    outputs: dict[str, Any] = field(default_factory=dict)
    _in_executor_input: bool = False
    _blank: int = 0

    def feed(self, text: str) -> list[str]:
        if _EXECUTOR_CHATTER.match(text):
            self._in_executor_input = text.rstrip().endswith("Got executor_input:")
            return []
        if self._in_executor_input:  # the JSON block ends with a closing brace at column 0
            self._in_executor_input = text.rstrip() != "}"
            return []
        if _GLOG.match(text):
            return []
        if text.startswith(OUTPUTS_MARKER):
            try:
                self.outputs.update(json.loads(text[len(OUTPUTS_MARKER):]))
            except ValueError:
                pass
            return []
        if not text.strip():
            self._blank += 1
            return []
        lines, self._blank = [""] * self._blank + [text], 0
        return lines

    def feed_all(self, lines: list[str]) -> list[str]:
        return [shown for line in lines for shown in self.feed(line)]
