"""One line at the top that every tab shares: platform, connection, the followed job's phase,
restart attempt, latest step/loss and goodput so far (with the time lost to failures and saves
when the line has room), and the step being run. Text plus colour, never colour alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui import format as fmt

if TYPE_CHECKING:
    from backend.goodput import GoodputReport
    from backend.models import JobSummary

# What the job bar names of the goodput's parts, when they took any time (the timeline has all).
BADPUT = (("wasted_progress", "wasted"), ("infrastructure_recovery", "recovery"), ("checkpoint_save", "ckpt save"))


class JobBar(Widget):
    DEFAULT_CSS = "JobBar { height: 1; }"

    platform: reactive[str] = reactive("local")
    connection: reactive[str] = reactive("connecting")  # "connected" | "connecting" | a reason
    job: reactive["JobSummary | None"] = reactive(None, always_update=True)
    progress: reactive[tuple[int | None, float | None]] = reactive((None, None))
    running_step: reactive[str | None] = reactive(None)
    running_for: reactive[float] = reactive(0.0)  # seconds the running step has taken so far

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.goodput: "GoodputReport | None" = None  # the followed job's, so far

    def show_goodput(self, report: "GoodputReport | None") -> None:
        """Redrawn only when what the bar shows of it changed: a running job's report changes
        with the clock, its share and seconds far less often."""
        before, self.goodput = self.goodput, report
        if _shown(before) != _shown(report):
            self.refresh()

    def render(self) -> Content:
        parts: list = [("kfcockpit", "bold"), " ", (self.platform, "$accent"), " "]
        if self.connection == "connected":
            parts.append(("● connected", "$success"))
        elif self.connection == "connecting":
            parts.append(("◌ connecting", "$warning"))
        else:
            parts.append((f"○ disconnected · {self.connection}", "bold $error"))
        job = self.job
        if job is not None:
            phase = job.phase.value
            parts += ["  ", (job.name, "bold"), " ", (phase, fmt.JOB_PHASE_STYLE.get(phase, "")),
                      f" attempt {job.restart_attempt}/{job.max_restarts}"]
            step, loss = self.progress
            if step is not None:
                parts.append(f" step {step}")
            if loss is not None:
                parts.append(f" loss {loss:.4f}")
        else:
            parts += ["  ", ("no job followed", "dim")]
        running = []
        if self.running_step:
            running = ["  ", (f"running {self.running_step} · {fmt.age(self.running_for)}…", "bold $warning")]
        report = self.goodput if job is not None else None
        if report is None:
            return Content.assemble(*parts, *running)
        share, *seconds = _shown(report)
        parts += ["  ", ("goodput ", "bold"), (share, "bold $success")]
        detail = [f" · {label} {shown}s" for (_, label), shown in zip(BADPUT, seconds) if shown != "0.0"]
        whole = Content.assemble(*parts, *detail, *running)
        if whole.cell_length <= self.size.width:
            return whole
        return Content.assemble(*parts, *running)  # narrow: the share alone


def _shown(report: "GoodputReport | None") -> tuple[str, ...] | None:
    """What the bar shows of a report: its share, and each part of BADPUT to a tenth of a second."""
    if report is None:
        return None
    return (f"{report.goodput:.0%}", *(f"{getattr(report, name):.1f}" for name, _ in BADPUT))
