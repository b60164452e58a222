"""Telling Ray Train's worker groups apart from the workers' `event=start rank=R pid=P` lines.

Ray Train restarts the whole worker group after a failure, and every worker of the new group
prints `event=start` again. So a rank that already started in the current group (with another
pid) opens a new group: restart attempt + 1. Lines may come in any rank order.
"""

from __future__ import annotations


class WorkerGroups:
    def __init__(self) -> None:
        self.attempt = -1  # no group started yet; 0 is the first group
        self.current: dict[int, int] = {}  # rank -> pid in the current group

    def started(self, rank: int, pid: int) -> bool:
        """Account for one worker start; True when it opened a new group."""
        new_group = self.attempt < 0 or self.current.get(rank, pid) != pid
        if new_group:
            self.attempt += 1
            self.current = {}
        self.current[rank] = pid
        return new_group
