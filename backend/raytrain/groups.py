"""Telling Ray Train's worker groups apart from the workers' `event=start rank=R pid=P` lines.

Ray Train restarts the whole worker group after a failure, and every worker of the new group
prints `event=start` again. So a rank that already started in the current group (as another
process) opens a new group: restart attempt + 1. Lines may come in any rank order.
"""

from __future__ import annotations

from typing import Hashable


def process_of(fields: dict[str, str]) -> Hashable:
    """The process a start line names: its pid and, where it printed it, when it started. A pid
    alone does not tell: a pod's pid is its own PID namespace's (node/pidns.py, and any real
    cluster's), so every attempt's worker of a rank may be PID 2."""
    return fields.get("pid"), fields.get("process_started")


class WorkerGroups:
    def __init__(self) -> None:
        self.attempt = -1  # no group started yet; 0 is the first group
        self.current: dict[int, Hashable] = {}  # rank -> its process in the current group

    def started(self, rank: int, pid: Hashable) -> bool:
        """Account for one worker start (`pid`: its process, a pid or `process_of`); True when it
        opened a new group."""
        new_group = self.attempt < 0 or self.current.get(rank, pid) != pid
        if new_group:
            self.attempt += 1
            self.current = {}
        self.current[rank] = pid
        return new_group
