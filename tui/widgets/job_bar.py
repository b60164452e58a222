"""One line at the top that every tab shares: platform, connection, the followed job's phase,
restart attempt and latest step/loss, and the step being run. Text plus colour, never colour alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui import format as fmt

if TYPE_CHECKING:
    from backend.models import JobSummary


class JobBar(Widget):
    DEFAULT_CSS = "JobBar { height: 1; }"

    platform: reactive[str] = reactive("local")
    connection: reactive[str] = reactive("connecting")  # "connected" | "connecting" | a reason
    job: reactive["JobSummary | None"] = reactive(None, always_update=True)
    progress: reactive[tuple[int | None, float | None]] = reactive((None, None))
    running_step: reactive[str | None] = reactive(None)
    running_for: reactive[float] = reactive(0.0)  # seconds the running step has taken so far

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
        if self.running_step:
            parts += ["  ", (f"running {self.running_step} · {fmt.age(self.running_for)}…", "bold $warning")]
        return Content.assemble(*parts)
