"""The failure timeline panel: for each restart of the followed job, what happened from the failure
to the first step trained again, each with its offset from the failure, then steps lost and the
recovery time; above them, the job's goodput so far and where the rest of its wall time went. The
model (`tui/model/timeline.py`) is fed by the screen; this widget only draws it, at most a few times a
second and only when the model changed (the goodput when the screen hands it a new report)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.cells import cell_len
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from backend.goodput import LABELS
from backend.words import count
from tui.model.timeline import FailureTimeline
from tui.widgets.attempt_ledger import AttemptLedger

if TYPE_CHECKING:
    from textual.app import ComposeResult

    from backend.goodput import GoodputReport
    from backend.hangs import Hang
    from tui.model.timeline import Moment, Restart

REDRAW_SECONDS = 0.25
GLYPH = {"failure": ("✘", "bold $error"), "save": ("⤓", "$accent"), "down": ("▼", "$warning"),
         "up": ("▲", "$success"), "resume": ("↺", "bold $success"), "step": ("▶", "bold $success"),
         "info": ("·", "dim"), "cordon": ("⊘", "$warning")}
# Each part of the wall time: its colour in the bar and its legend (text names it, colour helps).
PART_STYLE = {"productive": "$success", "program_startup": "$primary", "training_prep": "$primary-darken-2",
              "checkpoint_restore": "$secondary-lighten-1", "checkpoint_save": "$secondary-lighten-3",
              "wasted_progress": "$error", "infrastructure_recovery": "$warning", "other": "$text-muted"}


def goodput_content(report: "GoodputReport", width: int) -> Content:
    """`goodput 87% of 61.2 s`, a bar of the wall time by part, then each part that took any."""
    total = report.total
    parts: list = [("goodput ", "bold"), (f"{report.goodput:.0%}", "bold $success"), f" of {total:.1f} s"]
    if report.attempts_unseen:
        parts.append(("  (earlier attempts' logs are gone)", "dim"))
    if total > 0 and width > 0:
        parts.append("\n")
        so_far = drawn = 0  # each part ends where its running sum does: the bar is `width` long
        for name, seconds in report.parts():
            so_far += seconds
            end = min(width, round(width * so_far / total))
            parts.append(("█" * (end - drawn), PART_STYLE[name]))
            drawn = max(drawn, end)
    counts = {"productive": f" ({count(report.steps_kept, 'step')})",
              "wasted_progress": f" ({count(report.steps_lost, 'step')})" if report.steps_lost else "",
              # not the restart lines' figure (failure seen to training again): said, so the
              # two do not read as one measure that disagrees with itself
              "infrastructure_recovery": f" ({count(report.restarts, 'restart')}: the last step "
                                         "before the failure to the new group up)" if report.restarts else "",
              "checkpoint_save": f" ({count(report.saves, 'save')})" if report.saves else ""}
    for name, seconds in report.parts():
        if seconds >= 0.05 or name == "productive":
            parts += ["\n", ("■ ", PART_STYLE[name]), f"{LABELS[name]} {seconds:.1f} s{counts.get(name, '')}"]
    return Content.assemble(*parts)


def restart_content(r: "Restart") -> Content:
    if r.recovered:
        lost = f" · {count(r.steps_lost, 'step')} lost" if r.steps_lost is not None else ""
        head = Content.assemble((f"restart {r.attempt + 1}", "bold"),
                                (f" · training again {r.recovery_seconds:.1f} s after the failure", "bold $success"),
                                lost)
    else:
        head = Content.assemble((f"restart {r.attempt + 1}", "bold"), (" · recovering…", "bold $warning"))
    if r.node is not None:
        head = Content.assemble(head, (f" · node {r.node} failed", "$error"))
    parts: list = [head]
    for m in r.moments:
        glyph, style = GLYPH.get(m.kind, GLYPH["info"])
        parts += ["\n", (f"{m.at - r.failed_at:+6.1f} s ", "dim"), (glyph, style), " ", m.what]
    return Content.assemble(*parts)


def cordons_content(cordons: list["Moment"]) -> Content:
    """The nodes cordoned and uncordoned, each at its clock time (a cordon has no failure to be
    timed from)."""
    parts: list = [("nodes", "bold")]
    for m in cordons:
        glyph, style = GLYPH["cordon"]
        parts += ["\n", (time.strftime("%H:%M:%S ", time.localtime(m.at)), "dim"), (glyph, style), " ", m.what]
    return Content.assemble(*parts)


def restarts_summary(restarts: list["Restart"]) -> str:
    """The panel's subtitle: how many restarts, and what they cost, in the past tense once every
    one is over (the same figure as each restart's own line: failure to training again)."""
    if not restarts:
        return ""
    done = [r.recovery_seconds for r in restarts if r.recovery_seconds is not None]
    text = count(len(restarts), "restart")
    if len(done) < len(restarts):
        return text + " · recovering…"
    return text + f" · training again after {sum(done):.1f} s" + (" in all" if len(done) > 1 else "")


class GoodputSummary(Widget):
    """The goodput above the restarts, its bar as wide as the panel is."""

    DEFAULT_CSS = "GoodputSummary { height: auto; margin-bottom: 1; display: none; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.report: "GoodputReport | None" = None
        self._drawn: tuple | None = None  # what the last shown report draws, at the width then

    def show(self, report: "GoodputReport | None") -> None:
        """Redrawn only when it reads or looks different (a running job's report changes with
        the clock; what it shows, to a tenth of a second and a cell of the bar, less often)."""
        self.report = report
        self.display = report is not None
        width = self.size.width
        drawn = _drawn(report, width) if report is not None else None
        if drawn is not None and drawn != self._drawn:
            # A part that took no time so far adds a line: only a change of height lays the
            # screen out again (a running job's seconds change every tick; its lines seldom).
            self.refresh(layout=self._drawn is None or _rows(drawn, width) != _rows(self._drawn, width))
        self._drawn = drawn

    def render(self) -> Content:
        return goodput_content(self.report, self.size.width) if self.report is not None else Content("")


def _rows(drawn: tuple, width: int) -> int:
    """The rows a drawn report takes at `width` (a line wider than it wraps); 0: not laid out."""
    if width <= 0:
        return 0
    return sum(max(1, -(-cell_len(line) // width)) for line in drawn[0].split("\n"))


def _drawn(report: "GoodputReport", width: int) -> tuple:
    content = goodput_content(report, width)
    return content.plain, tuple(content.spans)  # Content's == compares the text alone


class TimelineView(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    TimelineView { padding: 0 1; scrollbar-size-vertical: 1; }
    TimelineView > Static { margin-bottom: 1; }
    #timeline-empty { color: $text-muted; }
    #timeline-hang { color: $error; text-style: bold; display: none; }
    #timeline-nodes { display: none; }
    """
    BORDER_TITLE = "failure timeline"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.model = FailureTimeline()
        self._drawn = -1

    def compose(self) -> "ComposeResult":
        yield AttemptLedger(id="attempt-ledger")  # shown in the timeline's zoom (screens/cockpit/attempts.py)
        yield GoodputSummary(id="goodput")
        yield Static(id="timeline-hang")
        yield Static(id="timeline-nodes")
        yield Static("no restart yet: kill a worker (ctrl+k on a pod) and watch the group recover",
                     id="timeline-empty")

    def on_mount(self) -> None:
        self.set_interval(REDRAW_SECONDS, self.redraw)

    def reset(self, job: str | None = None) -> None:
        self.model.reset(job)
        self.redraw()

    def show_goodput(self, report: "GoodputReport | None") -> None:
        """The followed job's goodput (None: no job followed)."""
        self.query_one(GoodputSummary).show(report)

    def show_hang(self, hang: "Hang | None") -> None:
        """The newest group hangs (None: it steps): which rank stopped, at which step, for how
        long against its usual step, and whether its pod still runs; above the restarts."""
        shown = self.query_one("#timeline-hang", Static)
        shown.display = hang is not None
        if hang is not None:
            shown.update(Content(f"⏸ {hang.one_line()}"))

    def redraw(self) -> None:
        if self.model.version == self._drawn:
            return
        self._drawn = self.model.version
        cordons = self.model.cordons()
        nodes = self.query_one("#timeline-nodes", Static)
        nodes.display = bool(cordons)
        if cordons:
            nodes.update(cordons_content(cordons))
        restarts = self.model.restarts()
        self.query_one("#timeline-empty").display = not restarts
        shown = list(self.query(".restart").results(Static))
        for i, r in enumerate(restarts):
            if i < len(shown):
                shown[i].update(restart_content(r))
            else:
                self.mount(Static(restart_content(r), classes="restart"))
        for extra in shown[len(restarts):]:
            extra.remove()
        self.border_subtitle = restarts_summary(restarts)
