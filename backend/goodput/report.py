"""What a goodput measurement says: a job's wall time split into parts that add up to it, each
restart taken apart, and the names ml-goodput-measurement gives the parts.

The parts are the anchor's badput types (ml_goodput_measurement/src/goodput.py, `BadputType`) that
a PyTorch job's lines can show; the accelerator-initialisation, data-loading and custom-event
types have no line here and are left out rather than shown as zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from backend.words import count

PARTS = ("productive", "program_startup", "training_prep", "checkpoint_restore", "checkpoint_save",
         "wasted_progress", "infrastructure_recovery", "other")
LABELS = {"productive": "productive", "program_startup": "program start-up", "training_prep": "training prep",
          "checkpoint_restore": "checkpoint restore", "checkpoint_save": "checkpoint save",
          "wasted_progress": "wasted progress", "infrastructure_recovery": "infrastructure recovery",
          "other": "other"}
BADPUT_TYPES = {"program_startup": "PROGRAM_STARTUP", "training_prep": "TRAINING_PREP",
                "checkpoint_restore": "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME",
                "checkpoint_save": "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME",
                "wasted_progress": "WASTED_PROGRESS_FROM_DISRUPTION",
                "infrastructure_recovery": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION", "other": "OTHER"}

# The points of a restart, in the order they happen; a restart's stages are the gaps between them.
RESTART_POINTS = ("failure_seen", "survivors_saved", "pods_created", "pods_started", "group_formed",
                  "checkpoint_loaded", "first_step")
STAGE_LABELS = {"survivors_saved": "survivors' save", "pods_created": "group torn down, new pods created",
                "pods_started": "processes started", "group_formed": "rendezvous (group formed)",
                "checkpoint_loaded": "checkpoint loaded", "first_step": "first step"}


@dataclass(frozen=True)
class RestartTimes:
    """One restart's points in time (epoch seconds; None where nothing told it)."""

    attempt: int  # the group it started (1 is the first restart)
    failure_seen: float | None = None
    survivors_saved: float | None = None
    pods_created: float | None = None
    pods_started: float | None = None
    group_formed: float | None = None
    checkpoint_loaded: float | None = None
    first_step: float | None = None

    def stages(self) -> list[tuple[str, float]]:
        """(point, seconds since the previous known point) for each point known after the first;
        they add up to `seconds`. A point from the API is a whole second (a pod's creation): one
        that seems to come before the point it follows is taken as that point, else the next
        stage would count the second's truncation as its own time."""
        known = [(name, getattr(self, name)) for name in RESTART_POINTS if getattr(self, name) is not None]
        stages, previous = [], known[0][1] if known else 0.0
        for name, at in known[1:]:
            at = max(at, previous)
            stages.append((name, at - previous))
            previous = at
        return stages

    @property
    def seconds(self) -> float | None:
        """Failure seen to first step: what the restart cost the job."""
        if self.failure_seen is None or self.first_step is None:
            return None
        return max(0.0, self.first_step - self.failure_seen)

    def as_dict(self) -> dict:
        return dict(asdict(self), seconds=self.seconds, stages=dict(self.stages()))


@dataclass(frozen=True)
class GoodputReport:
    """A job's wall time split into parts (seconds; they add up to `total`), with counts."""

    start: float
    end: float
    productive: float = 0.0
    program_startup: float = 0.0
    training_prep: float = 0.0
    checkpoint_restore: float = 0.0
    checkpoint_save: float = 0.0
    wasted_progress: float = 0.0
    infrastructure_recovery: float = 0.0
    other: float = 0.0
    steps_kept: int = 0  # the newest step the job's progress holds
    steps_lost: int = 0  # steps done again after a restart
    restarts: int = 0
    saves: int = 0  # periodic checkpoints
    step_seconds: float = 0.0  # mean time of a kept step (each group's first step aside)
    finished: bool = False
    restart_times: tuple[RestartTimes, ...] = field(default_factory=tuple)
    # Restarts the platform counts whose groups nothing here saw (their pods and logs are gone).
    attempts_unseen: int = 0

    @property
    def total(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def goodput(self) -> float:
        return self.productive / self.total if self.total > 0 else 0.0

    @property
    def save_stall(self) -> float:
        """Seconds a periodic save held the loop, per save (survivors' saves at teardown aside)."""
        return self.checkpoint_save / self.saves if self.saves else 0.0

    @property
    def recovery_per_restart(self) -> float:
        return self.infrastructure_recovery / self.restarts if self.restarts else 0.0

    def parts(self) -> list[tuple[str, float]]:
        return [(name, getattr(self, name)) for name in PARTS]

    def badput(self) -> dict[str, float]:
        """The parts other than productive, by the anchor's BadputType names."""
        return {BADPUT_TYPES[name]: seconds for name, seconds in self.parts() if name != "productive"}

    def as_dict(self) -> dict:
        data = asdict(self)
        data["restart_times"] = [r.as_dict() for r in self.restart_times]
        return dict(data, total=self.total, goodput=self.goodput, badput=self.badput())

    def one_line(self) -> str:
        """`goodput 0.93 of 61.2s: productive 57.0s, wasted progress 0.4s (3 steps), ...`"""
        counts = {"wasted_progress": f" ({count(self.steps_lost, 'step')})" if self.steps_lost else "",
                  "infrastructure_recovery": f" ({count(self.restarts, 'restart')})" if self.restarts else "",
                  "checkpoint_save": f" ({count(self.saves, 'save')})" if self.saves else ""}
        parts = ", ".join(f"{LABELS[name]} {seconds:.1f}s{counts.get(name, '')}"
                          for name, seconds in self.parts() if seconds >= 0.05 or name == "productive")
        return f"goodput {self.goodput:.2f} of {self.total:.1f}s: {parts}"
