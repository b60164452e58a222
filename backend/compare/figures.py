"""What the comparison measures and how it is shown: one Measurement per launcher, one table.

No torch, no ray: the lesson engine and the TUI read saved comparisons through these types.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field
from backend.words import count

Side = Literal["trainer", "ray"]


class ComparisonPlan(BaseModel):
    """The one run both launchers make: same loop, same data, same worker killed at the same step."""

    workers: int = Field(default=2, ge=1)
    steps: int = Field(default=40, ge=2)
    ckpt_every: int = Field(default=5, ge=1)
    kill_at_step: int = Field(default=12, ge=1)  # SIGKILL when the first line of this step shows
    kill_rank: int = Field(default=1, ge=0)
    step_delay: float = Field(default=0.1, ge=0)  # so a kill lands where it is aimed, mid-run
    samples: int = Field(default=640, ge=1)  # 10 steps per epoch at 2 workers: several epochs
    batch_size: int = Field(default=32, ge=1)

    def train_options(self) -> dict[str, int | float]:
        """The loop's options, the same for both launchers (training.ddp and training.ray_train)."""
        return {"steps": self.steps, "ckpt_every": self.ckpt_every, "step_delay": self.step_delay,
                "samples": self.samples, "batch_size": self.batch_size}


class Measurement(BaseModel):
    side: Side
    title: str  # "Trainer (TrainJob)"
    measured_with: str  # how this side was run on this machine, in a few words
    launch_model: str  # a few words for the table ...
    launch_detail: str  # ... and a sentence for the note
    recovery_model: str
    recovery_detail: str
    owner: str  # who owns the job definition
    owner_detail: str
    workers: int
    steps: int
    time_to_first_step: float  # seconds from launch to the first step line
    killed_rank: int
    killed_at_step: int  # the newest step printed when the kill was sent
    last_step_before_recovery: int  # the newest step the killed group printed
    resumed_from_step: int
    steps_lost: int  # steps the killed group had done beyond the checkpoint it resumed from
    recovery_seconds: float  # from the kill to the first step of the replacement group
    restarts: int
    final_loss: float
    wall_seconds: float  # from launch to the end of the last process
    params_sha256: str = ""
    job: str = ""  # the job on the cluster it ran as (kfcockpit logs <job>)
    run_dir: str = ""  # <volume>/<run directory>: the run's checkpoints and metrics.json


class Comparison(BaseModel):
    measured_at: float = Field(default_factory=time.time)
    plan: ComparisonPlan
    sides: list[Measurement]

    def side(self, name: Side) -> Measurement | None:
        return next((m for m in self.sides if m.side == name), None)

    def same_result(self) -> bool:
        """Both launchers ended with bitwise-equal parameters (same loop, exact resume)."""
        digests = {m.params_sha256 for m in self.sides}
        return len(self.sides) > 1 and len(digests) == 1 and "" not in digests

    def rows(self) -> list[tuple[str, ...]]:
        """The table (fits 80 columns): a header row, then one row per figure, a column per side."""
        sides = self.sides
        rows: list[tuple[str, ...]] = [("", *(m.title for m in sides))]

        def row(label: str, value) -> None:
            rows.append((label, *(value(m) for m in sides)))

        row("measured with", lambda m: m.measured_with)
        row("launch model", lambda m: m.launch_model)
        row("time to first step", lambda m: f"{m.time_to_first_step:.1f} s")
        row("failure recovery", lambda m: m.recovery_model)
        row("recovery after kill", lambda m: f"{m.recovery_seconds:.1f} s")
        row("steps lost", lambda m: f"{m.steps_lost} ({m.last_step_before_recovery} -> {m.resumed_from_step})")
        row("final loss", lambda m: f"{m.final_loss:.6f}")
        row("wall time", lambda m: f"{m.wall_seconds:.1f} s")
        row("job definition owner", lambda m: m.owner)
        return rows

    def details(self) -> list[str]:
        """One line per side and topic, saying what the table's short words mean."""
        lines = []
        for topic, detail in (("Launch model", "launch_detail"), ("Failure recovery", "recovery_detail"),
                              ("Who owns the job definition", "owner_detail")):
            lines += [f"{topic}, {m.title}: {getattr(m, detail)}." for m in self.sides]
        return lines

    def as_note(self) -> str:
        """The step-10 note's measured part: what was run, a Markdown table, what it means."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.measured_at))
        p = self.plan
        lines = [
            f"Measured on this machine at {when}: the same training loop both ways, {p.workers} "
            f"workers, {count(p.steps, 'step')}, a checkpoint every {p.ckpt_every}; rank {p.kill_rank} "
            f"SIGKILLed at step {p.kill_at_step}. Steps lost: newest step printed before the "
            f"restart -> checkpoint step resumed from.",
            "",
        ]
        rows = self.rows()
        lines.append("| " + " | ".join(rows[0]) + " |")
        lines.append("|" + "---|" * len(rows[0]))
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        lines += [""] + [f"- {line}" for line in self.details()]
        if self.same_result():
            lines += ["", "Both ended with bitwise-equal parameters: the launcher changes who starts "
                          "and restarts the workers, not what they compute."]
        return "\n".join(lines) + "\n"
