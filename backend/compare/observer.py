"""Turning a job's log lines into the comparison's figures, the same way for every launcher.

The lines come from the Cluster protocol (`stream_logs`: every pod's lines, merged, each with the
time the platform read it), so both launchers are watched by the same observer through the same
API. `see()` returns the pod to kill when the run reaches the plan's kill step (once); the caller
kills it (`kill_pod`) and calls `killed()`. Then the observer waits for the replacement group:
its `event=resumed` line and its first step after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.compare.figures import ComparisonPlan
from backend.models import LogLine, RunMetrics
from training.logfmt import parse_line


class ObservationError(Exception):
    """The run did not show what the comparison needs (no kill, no resume, no final loss)."""


@dataclass
class RunObserver:
    plan: ComparisonPlan
    launched_at: float
    first_step_at: float | None = None
    pods: dict[int, str] = field(default_factory=dict)  # rank -> pod, newest group
    killed_at: float | None = None
    killed_at_step: int = 0
    newest_step: int = 0
    last_step_before_recovery: int = 0
    resumed_from: int | None = None
    recovered_at: float | None = None
    group_starts: int = 0

    def see(self, line: LogLine) -> str | None:
        """Account for one line; the pod to kill when the kill step is reached, else None."""
        if "event=" in line.text:
            fields = parse_line(line.text)
            event = fields.get("event")
            if event == "start" and fields.get("rank", "").isdigit():
                rank = int(fields["rank"])
                if rank == 0:
                    self.group_starts += 1
                self.pods[rank] = line.pod
            elif event == "resumed" and self.killed_at is not None and self.resumed_from is None:
                self.resumed_from = int(fields["from_step"])
                self.last_step_before_recovery = self.newest_step
            return None
        step = line.step
        if step is None:
            return None
        if self.first_step_at is None:
            self.first_step_at = line.time
        if self.resumed_from is not None and self.recovered_at is None and step > self.resumed_from:
            self.recovered_at = line.time
        if self.resumed_from is None:
            self.newest_step = max(self.newest_step, step)
        if self.killed_at is None and step >= self.plan.kill_at_step and self.plan.kill_rank in self.pods:
            self.killed_at_step = step
            return self.pods[self.plan.kill_rank]
        return None

    def killed(self, at: float) -> None:
        self.killed_at = at

    def figures(self, ended_at: float, final: RunMetrics | None) -> dict:
        """The measured fields of a Measurement, with the run's metrics.json (`final`: the final
        loss and parameters, read from the volume rather than from the last lines); an
        ObservationError if the run lacks one."""
        missing = [what for what, value in (
            ("a first step", self.first_step_at), ("the kill", self.killed_at),
            ("a resume after the kill", self.resumed_from), ("a step after the resume", self.recovered_at),
            ("metrics.json at the end", final)) if value is None]
        if missing:
            raise ObservationError("the run showed no " + ", no ".join(missing))
        return {
            "time_to_first_step": self.first_step_at - self.launched_at,
            "killed_rank": self.plan.kill_rank,
            "killed_at_step": self.killed_at_step,
            "last_step_before_recovery": self.last_step_before_recovery,
            "resumed_from_step": self.resumed_from,
            "steps_lost": self.last_step_before_recovery - self.resumed_from,
            "recovery_seconds": self.recovered_at - self.killed_at,
            "restarts": self.group_starts - 1,
            "final_loss": final.final_loss,
            "params_sha256": final.params_sha256,
            "wall_seconds": ended_at - self.launched_at,
        }
