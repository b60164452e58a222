"""What the cockpit knows before its first frame, without pydantic.

Importing pydantic and building the settings and preferences models costs about as much as
Textual's own start-up, so the first frame is drawn from the command line and a plain JSON look at
the saved theme; the validated `Settings` and `CockpitConfig` are built in a thread right after
(`Session.open_*`, `CockpitApp.load_preferences`), and they win.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tui.saved import PREFERENCES_FILE, THEMES

if TYPE_CHECKING:
    from backend.cluster import Cluster
    from backend.settings import Settings
    from tui.config import CockpitConfig

ERRORS_LOG = "cockpit-errors.log"  # a bug's traceback, appended (tui/screens/error.py)


def saved_preferences(home: Path) -> dict:
    """The saved preferences file as plain JSON ({} when missing or unreadable: CockpitConfig.load
    reports a bad file once the preferences are validated)."""
    try:
        saved = json.loads((home / PREFERENCES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def first_theme(saved: dict) -> str:
    return saved.get("theme") if saved.get("theme") in THEMES else "dark"


@dataclass
class Launch:
    home: Path
    platform: str  # "local" or "kube", for the job bar before the settings exist
    theme: str  # "dark" or "light": the first frame's
    make_settings: Callable[[], "Settings"]
    theme_override: str | None = None  # --theme
    mouse: bool = True  # --no-mouse turns it off
    follow: str | None = None  # --follow: the job to follow at start, instead of the newest
    config: "CockpitConfig | None" = field(default=None)  # preset (tests); else loaded after paint
    # A cluster of its own instead of the settings' (a replay), and the clock that goes with it
    connect: "Callable[[Settings], Cluster] | None" = None
    clock: Callable[[], float] | None = None

    @classmethod
    def of(cls, settings: "Settings", config: "CockpitConfig | None" = None) -> "Launch":
        """For callers that already hold validated objects (tests, embedding)."""
        theme = config.theme if config is not None else first_theme(saved_preferences(settings.home))
        return cls(home=settings.home, platform=settings.backend, theme=theme,
                   make_settings=lambda: settings, config=config)
