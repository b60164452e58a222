"""Drawing at the rate a person reads: a widget whose data changes with every training step (a
step counter, a table row) is redrawn at once after a quiet spell, then at most once every few
tenths of a second, the last change always drawn. Each redraw is bytes on the learner's terminal,
over SSH: fifty a second for a step counter is a link's worth (bench/tui_bytes.py)."""

from __future__ import annotations

from typing import Callable

from textual.timer import Timer
from textual.widget import Widget


class Throttle:
    def __init__(self, widget: Widget, seconds: float, draw: Callable[[], None]) -> None:
        self.widget = widget
        self.seconds = seconds
        self.draw = draw
        self._cooling: Timer | None = None
        self._pending = False
        self._soon = False

    def __call__(self) -> None:
        """Something changed: draw now, or at the end of the current cool-down (none: `seconds`
        of 0, as the widget tests have it)."""
        if self.seconds <= 0:
            self.draw()
            return
        if self._cooling is not None:
            self._pending = True
            return
        self.draw()
        self._cooling = self.widget.set_timer(self.seconds, self._cooled)

    def now(self) -> None:
        """Draw now whatever the cool-down (a reset, a new job): what is pending is drawn with it."""
        self._pending = False
        self.draw()

    def soon(self) -> None:
        """Draw once the burst of changes under way is in, whatever the cool-down: at the next
        turn of the widget's message queue (a list of 512 pods arrives in one go; each drawn
        at once was 512 redraws of a growing table)."""
        if not self._soon:
            self._soon = True
            self.widget.call_later(self._drawn_soon)

    def _drawn_soon(self) -> None:
        self._soon = False
        self.now()

    def _cooled(self) -> None:
        self._cooling = None
        if self._pending:
            self._pending = False
            self()
