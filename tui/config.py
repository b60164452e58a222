"""The cockpit's own preferences (not the cluster's): theme, mouse, log buffer, kill confirmation.

Read from `<state root>/cockpit.json` and saved there when the learner switches theme, so a
workshop machine set to the light theme for the projector stays that way. Command-line flags win.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from training.atomic import write_atomic
from tui.saved import PREFERENCES_FILE as FILE_NAME
from tui.saved import THEMES



class CockpitConfig(BaseModel):
    theme: Literal["dark", "light"] = "dark"
    mouse: bool = True
    confirm_kill: bool = True  # k9s asks too: a stray ctrl+k in front of a class kills nothing
    log_lines: int = Field(default=20_000, ge=1_000, le=1_000_000)  # retained log lines

    @property
    def textual_theme(self) -> str:
        return THEMES[self.theme]

    @classmethod
    def load(cls, home: Path) -> tuple["CockpitConfig", str | None]:
        """The saved preferences, or the defaults and one line saying why the file was not used."""
        path = Path(home) / FILE_NAME
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8")), None
        except FileNotFoundError:
            return cls(), None
        except (OSError, ValueError, ValidationError) as exc:
            first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            return cls(), f"{path}: ignored ({first}); using defaults"

    def save(self, home: Path) -> None:
        write_atomic(Path(home) / FILE_NAME, json.dumps(self.model_dump(), indent=2) + "\n")
