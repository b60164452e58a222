"""A bug, shown whole: the traceback of an error that is not a user error, appended to the errors
log in the state root and shown in a dialog over the cockpit, which goes on running (close it with
escape). User errors never come here: they are one-line notifications (backend/errors.py).

Imported only when a bug happens, so it costs the start-up nothing."""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


def log_bug(log: Path, where: str, error: BaseException) -> tuple[str, str | None]:
    """Append the error's traceback to `log`; (the traceback, why it could not be logged or None)."""
    text = "".join(traceback.format_exception(error)).rstrip()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"=== {stamp} {where}\n{text}\n\n")
    except OSError as exc:
        return text, f"not logged: {exc}"
    return text, None


class ErrorScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    ErrorScreen { align: center middle; }
    ErrorScreen > Vertical { width: 90%; height: 80%; border: thick $error; }
    ErrorScreen #error-trace { height: 1fr; border: round $secondary; }
    ErrorScreen #error-where { text-style: bold; margin: 1 0 0 0; }
    """
    BINDINGS = [Binding("escape,enter", "dismiss", "Close", priority=True)]

    def __init__(self, where: str, trace: str, logged: str) -> None:
        super().__init__()
        self.where = where
        self.trace = trace
        self.logged = logged

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "a bug in the cockpit"
            yield Static(f"{self.where} failed. The cockpit goes on; this is not something you did.",
                         id="error-where", markup=False)
            yield Static(self.logged, classes="dim", markup=False)
            with VerticalScroll(id="error-trace"):
                yield Static(self.trace, markup=False)
            with Vertical(classes="buttons"):
                yield Button("Close (esc)", id="close", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss()
