"""The footer's key bar, drawn whether or not the terminal has the keyboard's focus.

Textual's Footer redraws its keys only while the app has focus (`app_focus`); in browser mode a
page the keyboard is not in (the presenter's on a projector, any audience page, a headless
browser) never has it, and the key bar stayed an empty strip. A room reads the keys anyway."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Footer

if TYPE_CHECKING:
    from textual.screen import Screen


class KeyBar(Footer):
    def bindings_changed(self, screen: "Screen") -> None:
        self._bindings_ready = True
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self.recompose)
