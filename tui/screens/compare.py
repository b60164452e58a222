"""Two snapshots side by side: for each run they hold, final loss, wall time, workers, steps,
resumes. Answers the lesson's "did the restarted run end where the clean one did?".

Names are shown whole, never cut (two runs cut to "run lesson-sca" cannot be told apart): the
snapshots are named once above the table and head its columns as A and B, and the first column
is as wide as the longest run name. Names and values are the cluster's: plain text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.model import format as fmt

if TYPE_CHECKING:
    from backend.models import Snapshot

ROWS = (
    ("final loss", lambda m: fmt.loss(m.final_loss)),
    ("wall time", lambda m: fmt.seconds(m.wall_seconds)),
    ("workers", lambda m: str(m.world_size)),
    ("steps", lambda m: str(m.steps)),
    ("resumes", lambda m: str(m.resumes)),
    ("launcher", lambda m: m.launcher),
)


def comparison_rows(a: "Snapshot", b: "Snapshot") -> list[tuple[Text | str, Text | str, Text | str]]:
    runs_a = {m.run: m for m in a.metrics}
    runs_b = {m.run: m for m in b.metrics}
    rows: list[tuple] = []
    for run in sorted(set(runs_a) | set(runs_b)):
        left, right = runs_a.get(run), runs_b.get(run)
        rows.append((Text(f"run {run or '/'}", style="bold"), "", ""))
        for label, show in ROWS:
            cells = [Text(show(m)) if m is not None else "-" for m in (left, right)]
            if label == "final loss" and left is not None and right is not None \
                    and left.final_loss != right.final_loss:
                lower = 0 if left.final_loss < right.final_loss else 1
                cells[lower] = Text(f"{cells[lower]} ▼", style="bold")
            rows.append((Text(f"  {label}"), *cells))
    return rows


class CompareScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,c", "close", "Close")]

    def __init__(self, a: "Snapshot", b: "Snapshot", **kwargs) -> None:
        super().__init__(**kwargs)
        self.a, self.b = a, b

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog wide"):
            yield Static(Content.assemble("Compare snapshots\n", ("A", "bold $accent"), f"  {self.a.name}\n",
                                          ("B", "bold $accent"), f"  {self.b.name}"), id="question")
            yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=False)
            if not self.a.metrics and not self.b.metrics:
                yield Static("neither snapshot holds a finished run (metrics.json): take snapshots "
                             "after a run completes", classes="dim")
            yield Static("▼ lower final loss · escape closes", classes="dim")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("", key="what")  # as wide as the longest run name
        table.add_column("A", key="a")
        table.add_column("B", key="b")
        for row in comparison_rows(self.a, self.b):
            table.add_row(*row)
        table.focus()

    def action_close(self) -> None:
        self.dismiss(None)
