"""The group summary above the pods table, for a group larger than the panel shows usefully
(tui/model/rank_group.py): the newest attempt's pods by phase, the ranks behind, stopped, failed or
waiting, and where what it knows comes from. Hidden while the table has a row per pod. Redrawn only
when the table hands it a summary that differs (the table's rows are drawn twice a second at most)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.widget import Widget

if TYPE_CHECKING:
    from tui.model.rank_group import RankGroup


class RankSummary(Widget):
    DEFAULT_CSS = "RankSummary { height: auto; max-height: 60%; display: none; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.group: "RankGroup | None" = None

    def show(self, group: "RankGroup | None") -> None:
        rows_before = len(self.group.rows()) if self.group is not None else 0
        self.group = group
        self.display = group is not None
        if group is not None:  # a new height lays the panel out again; the same, a repaint
            self.refresh(layout=len(group.rows()) != rows_before)

    def render(self) -> Content:
        if self.group is None:
            return Content("")
        # reasons and names are the cluster's text: Content pieces, never markup
        return Content("\n").join(Content.styled(text, style) for text, style in self.group.rows())
