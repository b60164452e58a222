"""Where the cockpit keeps its state. No dependencies: the UI reads it before its first frame."""

from __future__ import annotations

import os
from pathlib import Path


def default_home() -> Path:
    """$KFCOCKPIT_HOME, else $XDG_STATE_HOME/kfcockpit, else ~/.local/state/kfcockpit."""
    if os.environ.get("KFCOCKPIT_HOME"):
        return Path(os.environ["KFCOCKPIT_HOME"]).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg).expanduser() / "kfcockpit"
