"""`a`: the anatomy of the followed job (backend/anatomy, the same as `kfcockpit explain`): the
chain of objects it became, what each runtime patch changed, and one pod's pieces, each with who
put it there. A screen of its own, scrolled, as the help is: at 80x24 it needs every line.

The cockpit reads the objects once, when `a` is pressed (tui/screens/cockpit/anatomy.py), and
hands the anatomy here: the pieces change only when the group restarts. Every name and value is
the cluster's text, so all of it goes in as `Text`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

if TYPE_CHECKING:
    from backend.anatomy.model import Anatomy, Row

BY_WIDTH = 22  # the pieces' "who" column at most: the values keep the rest of 80 columns
NAME_WIDTH = 32  # a section's name column at most: a pod's name whole


def _grid(*widths: int | None) -> Table:
    grid = Table.grid(padding=(0, 1))
    for width in widths:
        grid.add_column(max_width=width, overflow="fold")
    return grid


def _section(title: str, rows: "tuple[Row, ...]") -> list:
    grid = _grid(NAME_WIDTH, None)
    for row in rows:
        value = Text(row.value)
        if row.note:
            value.append(f"  {row.note}", style="dim")
        grid.add_row(Text(row.name, style="bold"), value)
    return [Text(title, style="bold underline"), grid]


def _diff(anatomy: "Anatomy") -> list:
    """What each runtime patch changed, as a diff: - what the runtime had, + what the patch set."""
    parts: list = []
    for patch in anatomy.patches:
        parts.append(Text(f"runtimePatches manager {patch.manager}: {len(patch.changes)} field(s)",
                          style="bold underline"))
        for change in patch.changes:
            parts.append(Text(f"  {change.path}", style="bold"))
            lines = _grid(3, None)  # a long value folds under itself, not under the sign
            for sign, value, style in (("-", change.before, "red"), ("+", change.after, "green")):
                if value is not None:
                    lines.add_row(Text(f"  {sign}", style=style), Text(value, style=style))
            parts.append(lines)
    return parts


def anatomy_renderable(anatomy: "Anatomy") -> Group:
    """The anatomy as the view shows it: Text and grids, never markup (names are the cluster's)."""
    from backend.anatomy.provenance import FRAMEWORK_PARTS

    parts: list = []
    for section in anatomy.sections:
        parts += _section(section.title, section.rows)
    parts += _diff(anatomy)
    parts += [Text(f"note: {note}", style="italic") for note in anatomy.notes]
    if anatomy.pod is not None:
        parts.append(Text(f"pod {anatomy.pod} (rank {anatomy.rank}): who put each piece there",
                          style="bold underline"))
        pieces = _grid(BY_WIDTH, None)
        for piece in anatomy.pieces:
            pieces.add_row(Text(piece.source.by, style="bold"),
                           Text.assemble((f"{piece.kind} {piece.name}", "cyan"), f" = {piece.value}"))
        parts.append(pieces)
    parts.append(Text("the framework's, not the platform's", style="bold underline"))
    framework = _grid(BY_WIDTH, None)
    for name, what in FRAMEWORK_PARTS:
        framework.add_row(Text(name, style="bold"), Text(what))
    parts.append(framework)
    return Group(*parts)


class AnatomyScreen(Screen[None]):
    DEFAULT_CSS = """
    AnatomyScreen #anatomy { border: round $accent; border-title-style: bold; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,a,q", "close", "Close")]

    def __init__(self, anatomy: "Anatomy") -> None:
        super().__init__(id="anatomy-screen")
        self.anatomy = anatomy

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="anatomy"):
            yield Static(anatomy_renderable(self.anatomy), id="anatomy-text")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        scroll = self.query_one("#anatomy")
        scroll.border_title = Content(f"anatomy of {self.anatomy.job} · escape closes")  # the cluster's name: plain
        scroll.focus()

    def action_close(self) -> None:
        self.dismiss(None)
