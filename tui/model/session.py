"""What the cockpit talks to: the Cluster (through backend.connect) and the Lesson engine.

Imported by the app at start-up, so it imports neither at module level: the backend (and through
it the platform clients) loads in a thread after the first paint.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from backend.cluster import Cluster
    from backend.lesson.engine import Lesson
    from backend.settings import Settings


class Session:
    def __init__(self, make_settings: Callable[[], "Settings"], platform: str,
                 connect: "Callable[[Settings], Cluster] | None" = None) -> None:
        self._make_settings = make_settings
        self._connect = connect  # a cluster of its own (a replay) instead of the settings' platform
        self._settings: "Settings | None" = None
        self.platform = platform  # known from the command line, before the settings exist
        self.cluster: "Cluster | None" = None
        self.lesson: "Lesson | None" = None

    @property
    def settings(self) -> "Settings":
        """Built on first use, which is in open_lesson's thread after the first paint."""
        if self._settings is None:
            self._settings = self._make_settings()
        return self._settings

    async def open_lesson(self) -> None:
        """The lesson without a cluster: the checklist and notes work before (or without) one."""
        if self.lesson is None:
            self.lesson = await asyncio.to_thread(self._lesson, None)

    async def open_cluster(self) -> None:
        """Connect (in a thread: it imports the backend and may start the local controller)."""
        if self.cluster is not None:
            return
        if self._connect is not None:
            connect = self._connect
        else:
            from backend.connect import connect

        cluster = await asyncio.to_thread(connect, self.settings)
        self.lesson = await asyncio.to_thread(self._lesson, cluster)
        self.cluster = cluster

    def _lesson(self, cluster):
        from backend.lesson.engine import Lesson

        return Lesson(cluster, self.settings, interactive=True)  # step 6's kill is the learner's

    async def close(self) -> None:
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            await cluster.close()
