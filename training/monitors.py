"""What watches the training loop from beside it, on threads of its own: the heartbeat that says
a rank waits (heartbeat.py) and the progress rank 0 reports to the TrainJob (progress.py). The loop
tells it when a step begins and ends; nothing here can slow a step down."""

from __future__ import annotations

import time
from typing import Callable

from training.heartbeat import Heartbeat
from training.progress import ProgressReporter


class LoopMonitors:
    def __init__(self, emit: Callable[..., None], rank: int, world: int, total_steps: int):
        self.heartbeat = Heartbeat(emit, rank, world) if world > 1 else None
        self.progress = ProgressReporter(total_steps) if rank == 0 else None
        self._last: float | None = None

    def step_begins(self, step: int) -> None:
        if self.heartbeat is not None:
            self.heartbeat.begin(step)

    def step_ends(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.end()

    def stepped(self, step: int, loss: float) -> None:
        """A step's line is out: progress, with the time since the previous line as the pace."""
        now = time.monotonic()
        if self.progress is not None:
            pace = None if self._last is None else now - self._last
            self.progress.update(step, pace, {"loss": f"{loss:.6f}", "step": step})
        self._last = now

    def close(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
        if self.progress is not None:
            self.progress.close()
