"""One attempt's logs, chosen in the attempt ledger (the failure timeline's zoom): each of its
pods' log as the platform still keeps it, and for a pod whose container restarted in place, the
log of the run before (`kubectl logs -p`), which is where a crash-looped rank says why. A pod
deleted since (an attempt the JobSet replaced) has no log left: it says so, and where the lines
still are. After restarts a job has several pods per rank; here each attempt's are its own, so
the learner never reads another attempt's lines for this one's.

The cockpit reads the logs once, when the attempt is chosen (tui/screens/cockpit/attempts.py),
and hands them here; a Log widget draws them (plain text: every line is a worker's)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from tui.model.log_buffer import mark_line, printable, wrap_line

if TYPE_CHECKING:
    from backend.ledger.rows import AttemptRow
    from backend.models import LogLine


@dataclass(frozen=True)
class PodLogs:
    """What one pod of the attempt left: its log, the run before a restart in place, or why not."""

    pod: str
    rank: int | None
    lines: list["LogLine"] = field(default_factory=list)
    previous: list["LogLine"] | None = None  # None: its container never restarted in place
    missing: str = ""  # why there is no log (the pod is gone)


def log_rows(logs: list[PodLogs], width: int) -> list[str]:
    """The rows the view shows: a heading per pod and container run, then its lines, wrapped."""
    rows: list[str] = []
    for pod in logs:
        who = f"pod {pod.pod}" + (f" (rank {pod.rank})" if pod.rank is not None else "")
        runs = [(f"{who} · previous container", pod.previous)] if pod.previous is not None else []
        runs.append((f"{who}" + (" · container now" if pod.previous is not None else ""), pod.lines))
        for heading, lines in runs:
            rows += wrap_line(mark_line(heading), width)
            if pod.missing:
                rows.append(f"  {pod.missing}")
            elif not lines:
                rows.append("  (nothing printed)")
            for line in lines:
                stamp = time.strftime("%H:%M:%S", time.localtime(line.time))
                rows += wrap_line(f"{stamp} {printable(line.text)}", width)
    return rows


class AttemptLogsScreen(Screen[None]):
    DEFAULT_CSS = """
    AttemptLogsScreen #attempt-why { padding: 0 1; height: auto; }
    AttemptLogsScreen #attempt-logs { border: round $accent; border-title-style: bold; height: 1fr; }
    """
    BINDINGS = [Binding("escape,q", "close", "Close")]

    def __init__(self, job: str, row: "AttemptRow", logs: list[PodLogs]) -> None:
        super().__init__(id="attempt-logs-screen")
        self.job = job
        self.row = row
        self.logs = logs

    def compose(self) -> ComposeResult:
        yield Static(Content.assemble((f"attempt {self.row.attempt}: ", "bold"), self.row.why), id="attempt-why")
        yield Log(id="attempt-logs", highlight=False, auto_scroll=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        log = self.query_one(Log)
        # the cluster's names: plain text, never markup
        log.border_title = Content(f"attempt {self.row.attempt} of {self.job} · its pods' logs · escape closes")
        log.write_lines(log_rows(self.logs, max(20, self.size.width - 3)))
        log.focus()

    def action_close(self) -> None:
        self.dismiss(None)
