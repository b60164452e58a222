"""The cockpit screen (`screen.py`, the composition root) and its parts, one responsibility each:
`following.py`, `lesson.py`, `storage.py`, `pods.py` (on `part.py`)."""

from tui.screens.cockpit.screen import CockpitScreen

__all__ = ["CockpitScreen"]
