"""The cockpit on a shipped recording, with no cluster (the session connects to a ReplayCluster):
for tests whose subject is drawing or keys, where a cluster would only cost its start."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from backend.recording.format import load
from backend.recording.playhead import Playhead
from backend.recording.regenerate import RECORDINGS
from backend.recording.replay import ReplayCluster
from backend.settings import Settings
from tui.app import CockpitApp
from tui.config import CockpitConfig
from tui.launch import Launch

KILL_AND_RESUME = RECORDINGS / "kill-and-resume.kfrec.gz"


def replayed_app(home: Path, position: float | None = None, path: Path = KILL_AND_RESUME,
                 config: CockpitConfig | None = None) -> tuple[CockpitApp, ReplayCluster]:
    """The app on the recording at `position` seconds (default: its end, everything shown)."""
    recording = load(path)
    replay = ReplayCluster(recording, Playhead(recording.ended, position=recording.ended if position is None
                                               else position))
    launch = replace(Launch.of(Settings(home=home), config or CockpitConfig()), platform="replay",
                     follow=recording.job, connect=lambda settings: replay, clock=replay.now)
    return CockpitApp(launch), replay
