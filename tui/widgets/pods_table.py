"""The live pods table: one row per worker pod of the followed job, updated cell by cell from
watch events (k9s style: the table is never rebuilt, so the cursor and scroll stay put).

The platform deletes a failed group's pods when it recreates the group (JobSet), and the watch
says DELETED; the table keeps those rows as history, dimmed, below the live group, with how each
ended: a kill is what the lesson is about, and it must stay visible after the new group is up."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist

from tui import format as fmt
from tui.format import short_name

if TYPE_CHECKING:
    from backend.models import Pod, PodEvent

# (key, header, width). Ordered by what a learner looks at first: at 80 columns the last ones
# scroll off to the right rather than squeezing the pod name.
COLUMNS = (
    ("pod", "POD", 7),
    ("rank", "RANK", 4),
    ("attempt", "ATT", 3),
    ("phase", "PHASE", 9),
    ("reason", "REASON", 10),
    ("step", "STEP", 5),
    ("loss", "LOSS", 8),
    ("age", "AGE", 5),
)
HISTORY_ROWS = 12  # rows of ended attempts kept below the live group (the oldest go first)


class PodsTable(DataTable):
    """Rows keyed by pod name. Older restart attempts stay visible, dimmed, below the live group."""

    DEFAULT_CSS = "PodsTable { height: 1fr; scrollbar-size: 1 1; }"

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.clock = clock
        self.job: str | None = None
        self.pods: dict[str, "Pod"] = {}
        self.gone: dict[str, None] = {}  # pods the platform deleted, oldest first: history rows
        self.latest_attempt = 0

    def on_mount(self) -> None:
        for key, header, width in COLUMNS:
            self.add_column(header, key=key, width=width)
        self.set_interval(1.0, self.tick)

    @property
    def selected_pod(self) -> str | None:
        if not self.pods or self.cursor_row < 0 or self.cursor_row >= self.row_count:
            return None
        try:
            key, _ = self.coordinate_to_cell_key((self.cursor_row, 0))
        except CellDoesNotExist:
            return None
        return key.value

    def is_history(self, name: str) -> bool:
        return name in self.gone

    def reset(self, job: str | None, keep_history: bool = False) -> None:
        """Another job: its pods arrive from the new watch (list first, then changes). The same
        job's watch reopened (keep_history) lists its live pods again; the deleted ones stay."""
        if keep_history and job == self.job:
            for name in [n for n in self.pods if n not in self.gone]:
                del self.pods[name]
                self.remove_row(name)
            return
        self.job = job
        self.pods.clear()
        self.gone.clear()
        self.latest_attempt = 0
        self.clear()

    def apply(self, event: "PodEvent") -> None:
        pod = event.pod
        if event.type.value == "DELETED":
            self._ended(pod)
            return
        if pod.name in self.gone:
            return  # a late event for a pod already deleted
        known = pod.name in self.pods
        self.pods[pod.name] = pod
        newer_group = pod.restart_attempt > self.latest_attempt
        if newer_group:
            self.latest_attempt = pod.restart_attempt
        if known:
            for key, value in self._cells(pod).items():
                self.update_cell(pod.name, key, value)
        else:
            self.add_row(*self._cells(pod).values(), key=pod.name)
            self._order()
        if newer_group:  # the previous group is history now: dim it
            for name, old in self.pods.items():
                if old.restart_attempt < self.latest_attempt:
                    for key, value in self._cells(old).items():
                        self.update_cell(name, key, value)

    def _ended(self, pod: "Pod") -> None:
        """DELETED: keep the row as history, with how the pod ended."""
        if pod.name not in self.pods:
            return
        before = self.pods[pod.name]
        update: dict = {}
        if pod.phase.value not in ("Succeeded", "Failed"):
            update["phase"] = type(pod.phase)("Failed")
            update["reason"] = pod.reason or before.reason or "Deleted"
        pod = pod.model_copy(update=update) if update else pod
        if pod.last_step is None and before.last_step is not None:
            pod = pod.model_copy(update={"last_step": before.last_step, "last_loss": before.last_loss})
        self.pods[pod.name] = pod
        self.gone[pod.name] = None
        for key, value in self._cells(pod).items():
            self.update_cell(pod.name, key, value)
        while len(self.gone) > HISTORY_ROWS:
            oldest = next(iter(self.gone))
            del self.gone[oldest]
            del self.pods[oldest]
            self.remove_row(oldest)
        self._order()

    def tick(self) -> None:
        """Ages move with the clock, not with events."""
        now = self.clock()
        for name, pod in self.pods.items():
            if pod.finished is not None or name in self.gone:
                continue  # an ended pod's age stops moving
            try:
                self.update_cell(name, "age", self._styled(fmt.age(now - pod.created), pod))
            except CellDoesNotExist:
                pass

    def _order(self) -> None:
        # A cursor on the top row stays on top (the newest group's rank 0); one the learner moved
        # down follows its pod through the re-sort.
        selected = self.selected_pod if self.cursor_row > 0 else None
        gone = {short_name(name, self.job) for name in self.gone}
        self.sort("pod", "attempt", "rank",
                  key=lambda cells: (cells[0].plain in gone, -int(cells[1].plain),
                                     fmt.rank_sort_key(cells[2].plain)))
        if selected is not None and selected in self.pods:
            self.move_cursor(row=self.get_row_index(selected), animate=False)
        else:
            self.move_cursor(row=0, animate=False)

    def _styled(self, value: str, pod: "Pod", style: str = "") -> Text:
        if pod.restart_attempt < self.latest_attempt or pod.name in self.gone:
            style = f"dim {style}" if pod.phase.value == "Failed" and style else "dim"
        return Text(value, style=style, no_wrap=True, overflow="ellipsis")

    def _cells(self, pod: "Pod") -> dict[str, Text]:
        phase = pod.phase.value
        now = self.clock()
        return {
            "pod": self._styled(short_name(pod.name, self.job), pod),
            "rank": self._styled(fmt.rank_label(pod.rank), pod),
            "attempt": self._styled(str(pod.restart_attempt), pod, "bold" if pod.restart_attempt else ""),
            "phase": self._styled(phase, pod, fmt.PHASE_STYLE.get(phase, "")),
            "reason": self._styled(_reason(pod), pod),
            "step": self._styled(fmt.step(pod.last_step), pod),
            "loss": self._styled(fmt.loss(pod.last_loss), pod),
            "age": self._styled(fmt.age((pod.finished or now) - pod.created), pod),
        }


def _reason(pod: "Pod") -> str:
    """How a pod ended (or why it waits): 'Killed 137', 'Error 1', 'Unschedulable'."""
    if pod.exit_code is not None and pod.exit_code != 0:
        return f"{pod.reason or 'exit'} {pod.exit_code}"
    return pod.reason if pod.phase.value != "Running" else ""
