"""The live pods table: one row per worker pod of the followed job, updated cell by cell from
watch events (k9s style: the table is never rebuilt, so the cursor and scroll stay put)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist

from tui import format as fmt

if TYPE_CHECKING:
    from backend.models import Pod, PodEvent

# (key, header, width). Ordered by what a learner looks at first: at 80 columns the last ones
# scroll off to the right rather than squeezing the pod name.
COLUMNS = (
    ("pod", "POD", 8),
    ("rank", "RANK", 4),
    ("attempt", "ATT", 3),
    ("phase", "PHASE", 9),
    ("step", "STEP", 5),
    ("loss", "LOSS", 8),
    ("age", "AGE", 5),
    ("restarts", "RST", 3),
)


def short_name(pod: str, job: str | None) -> str:
    """What tells pods apart inside one job: JobSet names pods
    `<job>-<replicated job>-<job index>-<pod index>-<random>`; the panel title already names the
    job, so show `<pod index>-<random>` (the random part changes with each restart attempt)."""
    if job and pod.startswith(job + "-"):
        parts = pod[len(job) + 1:].split("-")
        if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
            return f"{parts[2]}-{parts[3]}"
        return pod[len(job) + 1:]
    return pod


class PodsTable(DataTable):
    """Rows keyed by pod name. Older restart attempts stay visible, dimmed, below the live group."""

    DEFAULT_CSS = "PodsTable { height: 1fr; scrollbar-size: 1 1; }"

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.clock = clock
        self.job: str | None = None
        self.pods: dict[str, "Pod"] = {}
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

    def reset(self, job: str | None) -> None:
        """Another job: its pods arrive from the new watch (list first, then changes)."""
        self.job = job
        self.pods.clear()
        self.latest_attempt = 0
        self.clear()

    def apply(self, event: "PodEvent") -> None:
        pod = event.pod
        if event.type.value == "DELETED":
            if self.pods.pop(pod.name, None) is not None:
                self.remove_row(pod.name)
            return
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

    def tick(self) -> None:
        """Ages move with the clock, not with events."""
        now = self.clock()
        for name, pod in self.pods.items():
            try:
                self.update_cell(name, "age", self._styled(fmt.age(now - pod.created), pod))
            except CellDoesNotExist:
                pass

    def _order(self) -> None:
        # A cursor on the top row stays on top (the newest group's rank 0); one the learner moved
        # down follows its pod through the re-sort.
        selected = self.selected_pod if self.cursor_row > 0 else None
        self.sort("attempt", "rank",
                  key=lambda cells: (-int(cells[0].plain), fmt.rank_sort_key(cells[1].plain)))
        if selected is not None and selected in self.pods:
            self.move_cursor(row=self.get_row_index(selected), animate=False)
        else:
            self.move_cursor(row=0, animate=False)

    def _styled(self, value: str, pod: "Pod", style: str = "") -> Text:
        if pod.restart_attempt < self.latest_attempt:
            style = "dim"
        return Text(value, style=style, no_wrap=True, overflow="ellipsis")

    def _cells(self, pod: "Pod") -> dict[str, Text]:
        phase = pod.phase.value
        now = self.clock()
        return {
            "pod": self._styled(short_name(pod.name, self.job), pod),
            "rank": self._styled(fmt.rank_label(pod.rank), pod),
            "attempt": self._styled(str(pod.restart_attempt), pod, "bold" if pod.restart_attempt else ""),
            "phase": self._styled(phase, pod, fmt.PHASE_STYLE.get(phase, "")),
            "step": self._styled(fmt.step(pod.last_step), pod),
            "loss": self._styled(fmt.loss(pod.last_loss), pod),
            "age": self._styled(fmt.age(now - pod.created), pod),
            "restarts": self._styled(str(pod.restarts), pod),
        }
