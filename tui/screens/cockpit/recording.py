"""Recordings in the cockpit: recording the followed job (a presenter keeps a good run: the
same Recorder as `kfcockpit record`, on the session's cluster, into the state root), and, on a
replay, its playhead's keys (pause, seek, speed) and the one line that refuses what would change
a cluster (the Capabilities' `read_only`)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from tui.screens.cockpit.part import Part

if TYPE_CHECKING:
    from backend.cluster import Playback

RECORDINGS_DIR = "recordings"  # in the state root
SEEK_SECONDS = 10.0


class Recording(Part):
    def __init__(self, screen) -> None:
        super().__init__(screen)
        self._stop: asyncio.Event | None = None

    # ------------------------------------------------------------------ a replay

    def refused(self) -> bool:
        """On a replay, say so in one line instead of changing a cluster (True: refused)."""
        cluster = self.screen.session.cluster
        why = cluster.capabilities.read_only if cluster is not None else None
        if why is not None:
            self.notify(why, title="replay", severity="warning")
        return why is not None

    def _playhead(self) -> "Playback | None":
        cluster = self.screen.session.cluster
        playhead = cluster.capabilities.playback if cluster is not None else None
        if playhead is None:
            self.notify("not a replay: pause, seek and speed are for `kfcockpit replay FILE`", severity="warning")
        return playhead

    def _said(self, playhead: "Playback", what: str) -> None:
        self.notify(f"{what} · {playhead.position():.0f}s of {playhead.length:.0f}s at {playhead.speed:g}x",
                    title="replay")
        self.changed("playback")

    def toggle_pause(self) -> None:
        if playhead := self._playhead():
            self._said(playhead, "paused" if playhead.toggle_pause() else "playing")

    def faster(self, steps: int) -> None:
        if playhead := self._playhead():
            playhead.faster(steps)
            self._said(playhead, "speed")

    def seek(self, seconds: float) -> None:
        if playhead := self._playhead():
            playhead.seek(playhead.position() + seconds)
            self._said(playhead, "back" if seconds < 0 else "forward")

    # ------------------------------------------------------------------ recording the followed job

    def toggle_record(self) -> None:
        if self._stop is not None:
            self._stop.set()
            return
        screen = self.screen
        job, cluster = screen.followed_job()[0], screen.session.cluster
        if job is None or cluster is None:
            self.notify("no job followed: follow one (j), then record it", severity="warning")
            return
        if cluster.capabilities.playback is not None:
            self.notify("a replay is a recording already", severity="warning")
            return
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = screen.app.launch.home / RECORDINGS_DIR / f"{job}-{stamp}.kfrec.gz"
        self._stop = asyncio.Event()
        self.run(self._record(cluster, job, path, self._stop), group="record")

    async def _record(self, cluster, job: str, path, stop: asyncio.Event) -> None:
        from backend.recording.recorder import Recorder

        self.notify(f"recording {job} until it ends (ctrl+r stops)", title="record")
        self.changed("recording")
        try:
            recorded = await self.call(f"record {job}", Recorder(cluster, job, path).run(stop))
        finally:
            self._stop = None
        if recorded is not None:
            self.notify(recorded.one_line(), title="recorded")
        self.changed("recorded")
