"""The attempt ledger, in the failure timeline's zoom (backend/ledger, what `kfcockpit goodput
--attempts` prints): the restarts used of the JobSet's budget, then one entry per attempt of the
followed job's group (its start, first step and end, from the first attempt's start, and why it
ended). enter on an attempt asks for its logs; the screen reads them (tui/screens/cockpit/
attempts.py). This widget only draws what it is handed.

An attempt is an option of two lines, not a table row: why an attempt ended (a rank, a pod, a node,
an exit code and its signal) is a reason, read whole, so it wraps under the times instead of being
cut at a column's edge. Every reason and name is the cluster's text: plain, never markup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from backend.words import count
from tui.model.format import since
from tui.widgets.message import WidgetMessage

if TYPE_CHECKING:
    from textual.app import ComposeResult

    from backend.ledger.rows import AttemptRow, Ledger


def budget_content(ledger: "Ledger") -> Content:
    """'restarts: 2 of 3 used, 1 left' with what the budget leaves out and the JobSet's notes."""
    uncounted = ledger.restarts_used - ledger.restarts_counted
    parts: list = [("restarts ", "bold"), f"{ledger.restarts_counted} of {ledger.max_restarts} used "
                   "(the JobSet's maxRestarts), ", (f"{ledger.restarts_left} left", "bold")]
    if uncounted > 0:
        parts.append(f"; {uncounted} more not counted (RestartJobSetAndIgnoreMaxRestarts)")
    for note in ledger.notes:
        parts += ["\n", ("note ", "dim"), note]
    return Content.assemble(*parts)


def attempt_content(row: "AttemptRow", origin: float | None) -> Content:
    first = "-" if row.first_step is None else f"{row.first_step} at {since(row.first_step_at, origin)}"
    return Content.assemble((f"attempt {row.attempt}", "bold"), f"  start {since(row.start, origin)}",
                            f"  first step {first}", f"  end {since(row.end, origin)}",
                            "\n  ", (row.why, "$warning" if row.why not in ("running", "completed") else "$success"))


class AttemptList(OptionList):
    """The attempts; enter (shown in the footer) asks for the highlighted one's logs."""

    BINDINGS = [Binding("enter", "select", "Attempt logs", key_display="⏎")]


class AttemptLedger(Vertical):
    DEFAULT_CSS = """
    AttemptLedger { height: auto; margin-bottom: 1; display: none; }
    AttemptLedger > #ledger-budget { margin-bottom: 0; }
    AttemptLedger > AttemptList, AttemptLedger > AttemptList:focus { height: auto; max-height: 16; border: none;
                                                                       padding: 0; }
    """

    @dataclass
    class Chosen(WidgetMessage):
        """The learner asked for an attempt's logs."""

        row: "AttemptRow"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ledger: "Ledger | None" = None

    def compose(self) -> "ComposeResult":
        yield Static(Content.styled("reading the attempts…", "dim"), id="ledger-budget")
        yield AttemptList(id="ledger-attempts")

    def show(self, ledger: "Ledger") -> None:
        """The ledger as read now; the highlight stays on the attempt it was on."""
        self.ledger = ledger
        attempts = self.query_one(AttemptList)
        kept = attempts.highlighted
        origin = ledger.rows[0].start if ledger.rows else None
        self.query_one("#ledger-budget", Static).update(Content.assemble(
            (f"{count(len(ledger.rows), 'attempt')} of {ledger.job}", "bold underline"), " · enter shows one's logs\n",
            budget_content(ledger)))
        attempts.set_options(Option(attempt_content(row, origin), id=str(row.attempt)) for row in ledger.rows)
        if ledger.rows:
            attempts.highlighted = min(kept, len(ledger.rows) - 1) if kept is not None else len(ledger.rows) - 1

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.ledger is not None and event.option.id is not None:
            row = next(r for r in self.ledger.rows if str(r.attempt) == event.option.id)
            self.post_message(self.Chosen(self, row))
