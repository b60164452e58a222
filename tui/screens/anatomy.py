"""`a`: the anatomy of the followed job (backend/anatomy, the same as `kfcockpit explain`): the
chain of objects it became, what each runtime patch changed, and one pod's pieces, each with who
put it there. A screen of its own, scrolled, as the help is: at 80x24 it needs every line.

The cockpit reads the objects once, when `a` is pressed (tui/screens/cockpit/anatomy.py), and
hands the anatomy here: the pieces change only when the group restarts. Every name and value is
the cluster's text, so all of it goes in as `Text`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

if TYPE_CHECKING:
    from backend.anatomy.model import Anatomy, Row

BY_WIDTH = 24  # the "who" column: 'ServiceAccount admission' whole


def _rows(text: Text, rows: "list[Row] | tuple[Row, ...]") -> None:
    width = max((len(r.name) for r in rows), default=0)
    for row in rows:
        text.append(f"  {row.name.ljust(width)}  ", style="bold")
        text.append(row.value)
        if row.note:
            text.append(f"  {row.note}", style="dim")
        text.append("\n")


def anatomy_text(anatomy: "Anatomy") -> Text:
    """The anatomy as the view shows it, plain text with styles (no markup: names are the cluster's)."""
    from backend.anatomy.provenance import FRAMEWORK_PARTS

    text = Text()
    for section in anatomy.sections:
        text.append(f"{section.title}\n", style="bold underline")
        _rows(text, section.rows)
    for note in anatomy.notes:
        text.append(f"note: {note}\n", style="italic")
    if anatomy.pod is not None:
        text.append(f"pod {anatomy.pod} (rank {anatomy.rank}): who put each piece there\n", style="bold underline")
        for piece in anatomy.pieces:
            text.append(f"  {piece.source.by[:BY_WIDTH].ljust(BY_WIDTH)} ", style="bold")
            text.append(f"{piece.kind} {piece.name}", style="cyan")
            text.append(f" = {piece.value}\n")
    text.append("the framework's, not the platform's\n", style="bold underline")
    for name, what in FRAMEWORK_PARTS:
        text.append(f"  {'framework'.ljust(BY_WIDTH)} ", style="bold")
        text.append(name, style="cyan")
        text.append(f": {what}\n")
    return text


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
            yield Static(anatomy_text(self.anatomy), id="anatomy-text")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        scroll = self.query_one("#anatomy")
        scroll.border_title = Content(f"anatomy of {self.anatomy.job} · escape closes")  # the cluster's name: plain
        scroll.focus()

    def action_close(self) -> None:
        self.dismiss(None)
