"""The base of the widgets' own messages: a dataclass that names the widget that sent it, so a
parent can route with `@on(Message, "#id")` instead of checking ids in its handler (as Textual's
own widgets do with `control`)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message
from textual.widget import Widget


@dataclass
class WidgetMessage(Message):
    widget: Widget

    @property
    def control(self) -> Widget:
        return self.widget
