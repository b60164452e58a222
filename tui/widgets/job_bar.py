"""One line at the top that every tab shares: platform, connection, the followed job's phase,
restart attempt (warned once one is left), a hang or why the group is silent when that is no
hang (waiting for a node, restarting), else a straggler (a rank slower than the group), the latest
step of all and the time left (the job's own trainerStatus report where its cluster has one, else
at the mean step), the loss, the goodput so far (with the time lost to failures and saves when the
line has room), and the step being run. Text plus colour, never colour alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.model import format as fmt
from tui.model.fitting import fit_fields
from tui.widgets.throttle import Throttle

if TYPE_CHECKING:
    from backend.goodput import GoodputReport
    from backend.hangs import Hang
    from backend.models import JobSummary
    from backend.stragglers import Straggler

PROGRESS_SECONDS = 0.5  # the step and loss are redrawn at most this often
# What the job bar names of the goodput's parts, when they took any time (the timeline has all).
BADPUT = (("wasted_progress", "wasted"), ("infrastructure_recovery", "recovery"), ("checkpoint_save", "ckpt save"))


class JobBar(Widget):
    DEFAULT_CSS = "JobBar { height: 1; }"

    platform: reactive[str] = reactive("local")
    connection: reactive[str] = reactive("connecting")  # "connected" | "connecting" | a reason
    job: reactive["JobSummary | None"] = reactive(None, always_update=True)
    # The job followed, by name: a step may name its job before the cluster lists it, or name
    # one that never came (its pipeline failed first); the bar says so rather than "no job".
    followed: reactive[str | None] = reactive(None)
    progress: reactive[tuple[int | None, float | None]] = reactive((None, None))
    running_step: reactive[str | None] = reactive(None)
    running_for: reactive[float] = reactive(0.0)  # seconds the running step has taken so far
    # The hang detector's verdict on the followed job's newest group (asked every second).
    hang: reactive["Hang | None"] = reactive(None)
    # Why the newest group prints no step when the platform says why (the failure timeline's
    # model: waiting for a node, restarting after a lost node): a silence that is no hang.
    silence: reactive[str | None] = reactive(None)
    # The straggler detector's slowest rank of the newest window (asked with the hang).
    straggler: reactive["Straggler | None"] = reactive(None)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.goodput: "GoodputReport | None" = None  # the followed job's, so far
        self._progress: tuple[int | None, float | None] = (None, None)  # the newest, maybe not drawn yet
        self.total_steps: int | None = None  # the run's --steps, from its start line: progress and ETA
        self._draw_progress = Throttle(self, PROGRESS_SECONDS, self._set_progress)

    def show_progress(self, step: int | None, loss: float | None, now: bool = False) -> None:
        """The followed job's newest step and loss: drawn at the rate a person reads (a job
        steps fifty times a second), or `now` (another job followed)."""
        self._progress = (step, loss)
        if now:
            self._draw_progress.now()
        else:
            self._draw_progress()

    def _set_progress(self) -> None:
        self.progress = self._progress

    def show_goodput(self, report: "GoodputReport | None") -> None:
        """Redrawn only when what the bar shows of it changed: a running job's report changes
        with the clock, its share and seconds far less often."""
        before, self.goodput = self.goodput, report
        if _shown(before) != _shown(report):
            self.refresh()

    def render(self) -> Content:
        """The parts in their order; where the line is too narrow for all, the least telling
        go whole (PRIORITY, through the one fitting rule, tui/model/fitting.py), so what is there is
        never cut: the running step, the job and the connection stay."""
        width = self.size.width
        fields = _fields(self._parts())
        if width > 0:
            kept = fit_fields(fields, width, _waiting_length, _priority, keep_ends=False)
            # The job's name gives up its middle rather than lose the goodput's share: counted
            # at its shortest, with only the fields that outrank that share besides.
            def outranking(chosen: list) -> int:
                return sum(_priority(f) >= PRIORITY["goodput"] for f in chosen)

            wanted = [f for f in fields if f in kept or _priority(f) >= PRIORITY["goodput"]]
            if len(wanted) > len(kept):
                elastic = fit_fields(wanted, width, _elastic_length, _priority, keep_ends=False)
                kept = elastic if outranking(elastic) > outranking(kept) else kept
            fields = kept
        parts = [part for field in fields for part in field]
        for name, keep in (("wait", WAIT_MIN), ("name", NAME_MIN)):
            over = _length(parts) - width if width > 0 else 0
            if over > 0:  # still too long: why it waits loses its end (the scheduler's details),
                # then the job's name its middle (its end tells jobs apart)
                parts = [(key, (_cut(text[0], max(keep, len(text[0]) - over), key), text[1]) if key == name
                          else text) for key, text in parts]
        return Content.assemble(*(text for _, text in parts))

    def _parts(self) -> list[tuple[str, tuple | str]]:
        """(name, text) pairs: the name says how long the part stays (PRIORITY)."""
        parts: list[tuple[str, tuple | str]] = [("brand", ("kfcockpit ", "bold")),
                                                ("platform", (f"{self.platform} ", "$accent"))]
        if self.connection == "connected":
            parts.append(("connection", ("● connected", "$success")))
        elif self.connection == "connecting":
            parts.append(("connection", ("◌ connecting", "$warning")))
        else:
            parts.append(("connection", (f"○ disconnected · {self.connection}", "bold $error")))
        job = self.job
        if job is not None:
            phase = job.phase.value
            parts += [("job", "  "), ("name", (job.name, "bold")), ("job", " "),
                      ("job", (phase, fmt.JOB_PHASE_STYLE.get(phase, ""))),
                      _attempt(job)]
            if self.hang is not None:
                where, silence = self.hang.short()
                parts += [("hang", (f"  {where}", "bold $error")), ("silence", (silence, "bold $error"))]
            elif self.silence:
                parts.append(("wait", (f"  {self.silence}", "bold $warning")))
            elif self.straggler is not None:
                who, cost = self.straggler.short()
                parts += [("straggler", (f"  {who}", "bold $warning")), ("straggler-cost", (cost, "$warning"))]
            step, loss = self.progress
            total = self.total_steps
            if step is not None:
                # the job's own report, where there is one, says how far it is; else step N/total
                whole = f"/{total}" if total and job.progress is None else ""
                parts.append(("step", f" step {step}{whole}"))
            report = self.goodput
            if job.progress is not None and not job.phase.finished:  # the job's own report (trainerStatus)
                left = f" ~{fmt.age(job.remaining)} left" if job.remaining is not None else ""
                parts.append(("eta", (f" {job.progress}%{left}", "dim")))
            elif step is not None and total and report is not None and report.step_seconds > 0 \
                    and not job.phase.finished and total > step:
                parts.append(("eta", (f" ~{fmt.age((total - step) * report.step_seconds)} left", "dim")))
            if loss is not None:
                parts.append(("loss", f" loss {loss:.4f}"))
            report = self.goodput
            if report is not None:
                share, *seconds = _shown(report)
                parts += [("goodput", "  "), ("goodput", ("goodput ", "bold")), ("goodput", (share, "bold $success"))]
                parts += [("badput", f" · {label} {shown}s")
                          for (_, label), shown in zip(BADPUT, seconds) if shown != "0.0"]
        elif self.followed:
            parts += [("job", "  "), ("name", (self.followed, "bold")),
                      ("job", (" not on the cluster (yet)", "$warning"))]
        else:
            parts += [("job", "  "), ("job", ("no job followed", "dim"))]
        if self.running_step:
            parts += [("running", "  "),
                      ("running", (f"running {self.running_step} · {fmt.age(self.running_for)}", "bold $warning"))]
        return parts


# How long each part stays when the line is too narrow (the higher, the longer): first go the time
# lost beside the goodput (the timeline has it), the platform, the time left, the loss (the pods
# table and the chart show it), the restart budget, the step; the goodput's share stays longer (a
# room reads it at 80 columns too), the brand longer still, then a warning that one restart or
# none is left, then how long a hang has been silent. The connection, the job and why it is not
# there, which rank hangs where and the running step always stay. A straggler's rank and speed
# stay longer than the step (the slowest rank is why the steps are slow), what it costs goes first.
PRIORITY = {"badput": 10, "straggler-cost": 15, "platform": 20, "eta": 30, "loss": 40, "attempt": 60, "step": 70,
            "straggler": 75, "goodput": 80, "brand": 90, "restarts-left": 95, "silence": 97, "wait": 98,
            "hang": 100, "name": 100, "job": 100, "connection": 100, "running": 1000}


NAME_MIN = 12  # the fewest cells a job's name is cut to (its middle goes: `lesso…a1b2c3`)
WAIT_MIN = 24  # the fewest cells why the group waits is cut to (its end goes: the scheduler's details)


def _priority(field: list[tuple[str, tuple | str]]) -> int:
    return PRIORITY.get(field[0][0], 0)


def _elastic_length(parts: list[tuple[str, tuple | str]]) -> int:
    """A field's length, a job's name at its shortest (it is cut to fit after the rest is fitted)."""
    if parts[0][0] == "name":
        return min(NAME_MIN, _length(parts))
    return _waiting_length(parts)


def _waiting_length(parts: list[tuple[str, tuple | str]]) -> int:
    """A field's length, why the group waits at its shortest (it is cut after the rest is fitted)."""
    if parts[0][0] == "wait":
        return min(WAIT_MIN, _length(parts))
    return _length(parts)


def _fields(parts: list[tuple[str, tuple | str]]) -> list[list[tuple[str, tuple | str]]]:
    """The parts grouped into fields: neighbours of one name go or stay together."""
    fields: list[list[tuple[str, tuple | str]]] = []
    for part in parts:
        if fields and fields[-1][0][0] == part[0]:
            fields[-1].append(part)
        else:
            fields.append([part])
    return fields


def _attempt(job: "JobSummary") -> tuple[str, tuple[str, str] | str]:
    """The restart budget used (the JobSet's own count: a reset shows), and a warning once one
    restart or none is left: the next failure ends the job (a warning outranks the goodput)."""
    text = f" attempt {job.restart_attempt}/{job.max_restarts}"
    left = job.max_restarts - job.restart_attempt
    if job.phase.finished or job.max_restarts <= 0 or left > 1:
        return "attempt", text
    if left == 1:
        return "restarts-left", (f"{text} · 1 more restart allowed", "bold $warning")
    return "restarts-left", (f"{text} · no more restarts", "bold $error")


def _cut(text: str, width: int, key: str) -> str:
    return text[:width - 1] + "…" if key == "wait" and len(text) > width else fmt.fit(text, width)


def _length(parts: list[tuple[str, tuple | str]]) -> int:
    return sum(cell_len(text[0] if isinstance(text, tuple) else text) for _, text in parts)


def _shown(report: "GoodputReport | None") -> tuple[str, ...] | None:
    """What the bar shows of a report: its share, and each part of BADPUT to a tenth of a second."""
    if report is None:
        return None
    return (f"{report.goodput:.0%}", *(f"{getattr(report, name):.1f}" for name, _ in BADPUT))
