"""The live pods table: one row per worker pod of the followed job, updated cell by cell from
watch events (k9s style: the table is never rebuilt, so the cursor and scroll stay put); for a
group larger than the panel shows usefully, the group summarised (tui/model/rank_group.py, shown above
the table by the screen) and a row only for the ranks worth one: rank 0, those a person went to
(`go_to`), the failed, stopped, behind and waiting. The ranks with a row are the ones whose logs
are read (`RanksShown`, the screen's log focus): what the cockpit costs grows with what it shows,
not with the group.

The platform deletes a failed group's pods when it recreates the group (JobSet), and the watch
says DELETED; the table keeps those rows as history, dimmed, below the live group, with how each
ended: a kill is what the lesson is about, and it must stay visible after the new group is up.

NODE is the node the pod was bound to (kind's `<cluster>-worker2` shown as `worker2`; "-" while
it waits for one). CPU and MEM are each pod's usage from metrics.k8s.io (`kubectl top pod`), handed in every few
seconds by `show_usage` ("-" where unknown: no metrics-server, or not sampled yet). A narrow table
drops its least telling columns (it never cuts a value short): the columns are chosen again when
its width changes.

A pod that runs several ranks (one per GPU, torchrun's processes per node) has a row per rank,
each with the pod's name and that rank's own STEP and LOSS; the ranks are told by the lines
(`rank=`) and the pod's PET_* environment, never by its index alone. Selecting any of them
selects the pod (a kill takes all its ranks, and says which).

The model (`pods`) takes every event at once, and each rank's newest step from the lines read
(`progress`); the rows are drawn at the rate a person reads (`ROWS_SECONDS`, throttle.py): a job
steps fifty times a second and each step changes STEP and LOSS, and only the cells that changed
are repainted (keyed_table.py)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Iterable

from rich.text import Text
from textual.message import Message

from backend.models import DRIVER_RANK, MAX_FOLLOWED
from tui.model import format as fmt
from tui.model.format import short_name
from tui.model.rank_group import RankGroup, ranks_to_show, summarize
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.throttle import Throttle

if TYPE_CHECKING:
    from backend.hangs import Hang
    from backend.models import LogLine, Pod, PodEvent, PodUsage
    from backend.stragglers import Straggler

# (key, header, width), in the order shown.
COLUMNS = (
    ("pod", "POD", 7),
    ("rank", "RANK", 4),
    ("attempt", "ATT", 3),
    ("phase", "PHASE", 9),
    ("node", "NODE", 8),
    ("reason", "REASON", 10),
    ("step", "STEP", 5),
    ("loss", "LOSS", 8),
    ("cpu", "CPU", 4),
    ("mem", "MEM", 5),
    ("age", "AGE", 5),
)
# What goes first when the table is too narrow for every column (the grid's pods panel at 120x36
# and the tabs beside the checklist at 80x24 are ~47 cells): the node (where a pod runs matters
# on a cluster of several nodes, and `kubectl get pods -o wide` shows it), the age (the job bar has the job's),
# the loss (every rank prints the same all-reduced loss; the job bar and the chart show it), the
# reason (the phase still says a pod failed), then memory and CPU. Pod, rank, attempt, phase and
# step always stay (the sort and a kill need the first three).
DROP_ORDER = ("node", "age", "loss", "reason", "mem", "cpu")
GAP = 1  # cells between columns: DataTable's padding (1 each side) would cost a column at ~47
USAGE_SECONDS = 3.0  # how often CPU and MEM are read while the table is on screen
HISTORY_ROWS = 12  # rows of ended attempts kept below the live group (the oldest go first)
# Of a group larger than FEW_PODS, the first pods to end in each attempt are its history (the
# failure, and the first pods the restart tore down); the hundreds torn down after them are not.
HISTORY_PER_ATTEMPT = 3
FEW_PODS = 8  # a group this small always has a row per pod, whatever the panel's height
PINNED_AT_MOST = 4  # ranks a person went to (g) that keep a row; the oldest go first
ROWS_SECONDS = 0.5  # the rows are redrawn at most this often


class PodsTable(KeyedTable):
    """Rows keyed by pod name, drawn from what the watch said (`pods`, `gone`, `usage`) and what
    the logs said (`steps`): each change recomputes the rows and KeyedTable writes only the cells
    that differ. Older restart attempts stay visible, dimmed, below the live group."""

    DEFAULT_CSS = "PodsTable { height: 1fr; scrollbar-size: 1 1; }"

    class Grouped(Message):
        """The group summary to show above the rows (None: the table has a row per pod)."""

        def __init__(self, table: "PodsTable", group: RankGroup | None) -> None:
            super().__init__()
            self.table = table
            self.group = group

        @property
        def control(self) -> "PodsTable":
            return self.table

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, PodsTable.Grouped)

    class RanksShown(Message):
        """The ranks with a row, most telling first: the ones whose logs are worth reading."""

        def __init__(self, table: "PodsTable", ranks: tuple[int, ...]) -> None:
            super().__init__()
            self.table = table
            self.ranks = ranks

        @property
        def control(self) -> "PodsTable":
            return self.table

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, PodsTable.RanksShown)

    def __init__(self, clock: Callable[[], float] = time.time, redraw_seconds: float = ROWS_SECONDS,
                 **kwargs) -> None:
        super().__init__(COLUMNS, zebra_stripes=False, cell_padding=0, **kwargs)
        self.clock = clock
        self.job: str | None = None
        self.pods: dict[str, "Pod"] = {}
        self.gone: dict[str, None] = {}  # pods the platform deleted, oldest first: history rows
        self.latest_attempt = 0
        self.usage: dict[str, "PodUsage"] = {}  # the newest metrics.k8s.io reading, by pod
        self.steps: dict[str, tuple[int, float | None]] = {}  # pod -> its newest (step, loss) read
        self._rank_steps: dict[str, dict[int, tuple[int, float | None]]] = {}  # pod -> rank -> (step, loss)
        self.pinned: list[int] = []  # ranks a person went to, newest last
        self.hang: "Hang | None" = None  # the newest group's, from the hang detector
        self.stragglers: dict[int, "Straggler"] = {}  # the newest group's, by rank
        self.group: RankGroup | None = None  # shown instead of a row per pod (None: rows)
        self.shown_ranks: tuple[int, ...] = ()
        self.shown_columns: tuple[str, ...] = ()
        self.pod_cells = POD_MIN  # the POD column's width: the room the other columns leave
        self._height = FEW_PODS  # rows the table showed when it last had a height
        self._sizes: dict[int, int] = {}  # restart attempt -> its pods seen
        self._ended: dict[int, int] = {}  # restart attempt -> its pods seen to end
        self._redraw = Throttle(self, redraw_seconds, self._show)

    def on_mount(self) -> None:
        self._lay_out_columns(columns_for(self.size.width or 200), POD_MIN)
        self.set_interval(1.0, self.tick)

    def on_resize(self) -> None:
        if self.size.height > 1:
            self._height = self.size.height - 1  # less the header
        wanted = columns_for(self.size.width)
        pod_cells = pod_cells_for(self.size.width, wanted)
        if wanted != self.shown_columns or pod_cells != self.pod_cells:
            self._lay_out_columns(wanted, pod_cells)
        else:
            self._redraw()  # a panel tall enough now shows a row per pod, or too short no more

    def _lay_out_columns(self, keys: tuple[str, ...], pod_cells: int) -> None:
        """Rebuild with these columns (a width change, not an event: rows and cursor come back)."""
        selected = self.selected_pod
        self.shown_columns, self.pod_cells = keys, pod_cells
        self.set_columns(tuple((key, header, (pod_cells if key == "pod" else width) + GAP)
                               for key, header, width in COLUMNS if key in keys))
        self._show()
        if selected in self._rows:
            self.move_cursor(row=self.get_row_index(selected), animate=False)

    @property
    def wants_usage(self) -> bool:
        """Worth reading metrics for: a job is followed and the table is on screen."""
        return self.job is not None and self.is_on_screen

    @property
    def usage_ranks(self) -> tuple[int, ...] | None:
        """The ranks whose usage is worth reading: those with a row (None: every pod has one)."""
        return self.shown_ranks if self.group is not None else None

    def show_usage(self, usage: "dict[str, PodUsage] | None") -> None:
        """A metrics.k8s.io reading (None: none to be had); pods it lacks show "-"."""
        self.usage = dict(usage or {})
        self._redraw()

    def show_hang(self, hang: "Hang | None") -> None:
        """The hang detector's verdict on the newest group, asked every second."""
        if hang != self.hang:
            self.hang = hang
            self._redraw()

    def show_stragglers(self, stragglers: "tuple[Straggler, ...]") -> None:
        """The straggler detector's verdict on the newest group's newest window: each one's row
        says so in place of its phase (Running), and its speed where REASON is shown."""
        by_rank = {s.rank: s for s in stragglers}
        if by_rank != self.stragglers:
            self.stragglers = by_rank
            self._redraw()

    @property
    def selected_pod(self) -> str | None:
        key = self.selected_key
        return key.split(RANK_ROW)[0] if key is not None else None

    def is_history(self, name: str) -> bool:
        return name in self.gone

    def reset(self, job: str | None, keep_history: bool = False) -> None:
        """Another job: its pods arrive from the new watch (list first, then changes). The same
        job's watch reopened (keep_history) lists its live pods again; the deleted ones stay."""
        if keep_history and job == self.job:
            self.pods = {name: pod for name, pod in self.pods.items() if name in self.gone}
        else:
            self.job = job
            self.pods.clear()
            self.gone.clear()
            self.latest_attempt = 0
            self.usage.clear()
            self.steps.clear()
            self._rank_steps.clear()
            self.pinned.clear()
            self.hang = None
            self.stragglers = {}
            self._sizes.clear()
            self._ended.clear()
        self._redraw.now()

    def apply(self, event: "PodEvent") -> None:
        pod = event.pod
        new = pod.name not in self.pods
        if event.type.value == "DELETED":
            self._ended_pod(pod)
        elif pod.name not in self.gone:  # else a late event for a pod already deleted
            if new:
                self._sizes[pod.restart_attempt] = self._sizes.get(pod.restart_attempt, 0) + 1
            self.pods[pod.name] = pod
            self.latest_attempt = max(self.latest_attempt, pod.restart_attempt)  # older groups dim
        if new or event.type.value == "DELETED":
            self._redraw.soon()  # a pod came or went (a restart): seen at once, and rare
        else:
            self._redraw()

    def progress(self, lines: "Iterable[LogLine]") -> None:
        """Log lines read: each rank's newest step and loss; a pod's STEP and LOSS are its
        rank furthest behind (a pod runs one rank per GPU: the slowest one holds the group)."""
        steps, by_rank = self.steps, self._rank_steps
        for line in lines:
            if line.step is not None:
                ranks = by_rank.setdefault(line.pod, {})
                ranks[line.rank] = (line.step, line.loss)
                steps[line.pod] = min(ranks.values(), key=lambda found: found[0]) if len(ranks) > 1 \
                    else (line.step, line.loss)
        self._redraw()

    def ranks_of(self, name: str) -> str:
        """`rank 1`, `ranks 2-3`: who goes with a pod (a kill names them)."""
        pod = self.pods.get(name)
        return fmt.ranks_label(pod.ranks) if pod is not None else "its ranks"

    def go_to(self, rank: int) -> str | None:
        """A person asks for a rank (g): it keeps a row, so its lines are read; the cursor goes
        to its newest pod. The pod's name, or None when the group has no such rank."""
        pod = self._newest_of(rank)
        if pod is None:
            return None
        kept = self.pods[pod].rank  # its pod's row is kept, by the pod's index (the log focus's)
        if kept in self.pinned:
            self.pinned.remove(kept)
        self.pinned = [*self.pinned, kept][-PINNED_AT_MOST:]
        self._redraw.now()
        asked = next((key for key in (f"{pod}{RANK_ROW}{rank}", pod) if key in self._rows), None)
        if asked is not None:  # the rank's own row where its pod runs several
            self.move_cursor(row=self.get_row_index(asked), animate=False)
        return pod

    def _newest_of(self, rank: int) -> str | None:
        found = [p for p in self.pods.values() if rank in p.ranks and p.name not in self.gone]
        return max(found, key=lambda p: p.restart_attempt).name if found else None

    def _ended_pod(self, pod: "Pod") -> None:
        """DELETED: keep the row as history, with how the pod ended (of a large group, only the
        first few of each attempt to end)."""
        if pod.name not in self.pods:
            return
        attempt = pod.restart_attempt
        self._ended[attempt] = self._ended.get(attempt, 0) + 1
        if self._sizes.get(attempt, 0) > FEW_PODS and self._ended[attempt] > HISTORY_PER_ATTEMPT:
            del self.pods[pod.name]
            self.steps.pop(pod.name, None)
            self._rank_steps.pop(pod.name, None)
            return
        before = self.pods[pod.name]
        update: dict = {}
        if pod.phase.value not in ("Succeeded", "Failed"):
            update["phase"] = type(pod.phase)("Failed")
            update["reason"] = pod.reason or before.reason or "Deleted"
        if pod.last_step is None and before.last_step is not None:
            update.update(last_step=before.last_step, last_loss=before.last_loss)
        self.pods[pod.name] = pod.model_copy(update=update) if update else pod
        self.gone[pod.name] = None
        while len(self.gone) > HISTORY_ROWS:
            oldest = next(iter(self.gone))
            del self.gone[oldest]
            del self.pods[oldest]
            self.steps.pop(oldest, None)
            self._rank_steps.pop(oldest, None)

    def tick(self) -> None:
        """Ages move with the clock, not with events."""
        self._redraw()

    # ------------------------------------------------------------------ drawing

    def _grouped(self) -> bool:
        """More pods in the newest group than the panel shows usefully (or than logs are read)."""
        live = sum(1 for p in self.pods.values() if p.restart_attempt == self.latest_attempt
                   and p.name not in self.gone)
        return live > min(MAX_FOLLOWED, max(FEW_PODS, self._height))

    def _show(self) -> None:
        if not self.shown_columns:
            return  # not laid out yet: on_mount shows what arrived by then
        group, names, ranks = self._what_to_show()
        if self.sync({key: tuple(cells.values()) for name in names for key, cells in self._rows_of(self.pods[name])}):
            self._order()
        if group != self.group:
            self.group = group
            self.post_message(self.Grouped(self, group))
        if ranks != self.shown_ranks:
            self.shown_ranks = ranks
            self.post_message(self.RanksShown(self, ranks))

    def _what_to_show(self) -> tuple[RankGroup | None, list[str], tuple[int, ...]]:
        """(the summary or None, the pods with a row, the ranks whose logs are worth reading)."""
        live = [p for p in self.pods.values() if p.name not in self.gone]
        if not self._grouped():
            ranks = sorted({p.rank for p in live}, key=lambda r: (r != 0, r))
            return None, list(self.pods), tuple(ranks)
        steps = {name: step for name, (step, _) in self.steps.items()}
        group = summarize(self.pods, steps, self.latest_attempt, self.hang,
                          tuple(sorted(self.stragglers.values(), key=lambda s: s.speed)))
        wanted = ranks_to_show(group, self.pinned)
        if any(p.rank == DRIVER_RANK for p in live):
            wanted = [wanted[0], DRIVER_RANK, *wanted[1:]][:MAX_FOLLOWED]
        chosen = set(wanted)
        names = [p.name for p in live if p.rank in chosen and p.restart_attempt == self.latest_attempt]
        return group, names + list(self.gone), tuple(wanted)

    def _order(self) -> None:
        # A cursor on the top row stays on top (the newest group's rank 0); one the learner moved
        # down follows its pod through the re-sort.
        selected = self.selected_pod if self.cursor_row > 0 else None
        gone = {self.pod_label(name) for name in self.gone}
        self.sort("pod", "attempt", "rank",
                  key=lambda cells: (cells[0].plain in gone, -int(cells[1].plain),
                                     fmt.rank_sort_key(cells[2].plain)))
        if selected is not None and selected in self._rows:
            self.move_cursor(row=self.get_row_index(selected), animate=False)
        else:
            self.move_cursor(row=0, animate=False)

    def pod_label(self, name: str) -> str:
        """The whole pod name where the column has room for it (kubectl's name, to copy), else
        the part that tells the job's pods apart (the panel's title names the job)."""
        return name if len(name) <= self.pod_cells else short_name(name, self.job)

    def _styled(self, value: str, pod: "Pod", style: str = "") -> Text:
        if pod.restart_attempt < self.latest_attempt or pod.name in self.gone:
            style = f"dim {style}" if pod.phase.value == "Failed" and style else "dim"
        return Text(value, style=style, no_wrap=True, overflow="ellipsis")

    def _rows_of(self, pod: "Pod") -> list[tuple[str, dict[str, Text]]]:
        """(row key, cells) of a pod: one row, or one per rank of a pod that runs several (the
        first keyed by the pod's name, so the cursor finds the pod)."""
        if len(pod.ranks) <= 1:
            return [(pod.name, self._cells(pod))]
        own = self._rank_steps.get(pod.name, {})
        return [(pod.name if i == 0 else f"{pod.name}{RANK_ROW}{rank}",
                 self._cells(pod, (rank,), own.get(rank, (pod.last_step, pod.last_loss))))
                for i, rank in enumerate(pod.ranks)]

    def _cells(self, pod: "Pod", ranks: tuple[int, ...] | None = None,
               progress: "tuple[int | None, float | None] | None" = None) -> dict[str, Text]:
        """The shown columns' cells of a pod (or of some of its ranks), in column order."""
        phase = pod.phase.value
        now = self.clock()
        usage = self.usage.get(pod.name) if pod.phase.value == "Running" else None
        step, loss = progress or self.steps.get(pod.name, (pod.last_step, pod.last_loss))
        slow = self._straggler(pod, ranks)
        cells = {
            "pod": self._styled(self.pod_label(pod.name), pod),
            "rank": self._styled(fmt.pod_ranks(ranks or pod.ranks), pod),
            "attempt": self._styled(str(pod.restart_attempt), pod, "bold" if pod.restart_attempt else ""),
            "phase": self._styled("Straggler", pod, "bold $warning") if slow else
            self._styled(phase, pod, fmt.PHASE_STYLE.get(phase, "")),
            "node": self._styled(fmt.node_name(pod.node), pod),
            "reason": self._styled(f"speed {slow.speed:.2f}" if slow else fmt.pod_reason(pod), pod),
            "step": self._styled(fmt.step(step), pod),
            "loss": self._styled(fmt.loss(loss), pod),
            "cpu": self._styled(fmt.cpu(usage.cpu_cores if usage else None), pod),
            "mem": self._styled(fmt.memory(usage.memory_bytes if usage else None), pod),
            # kubectl's AGE: since the pod was created, finished or not ("1s" for a pod that ran a
            # second 13 minutes ago was its run time, not its age)
            "age": self._styled(fmt.age(now - pod.created), pod),
        }
        return {key: cell for key, cell in cells.items() if key in self.shown_columns}

    def _straggler(self, pod: "Pod", ranks: tuple[int, ...] | None) -> "Straggler | None":
        """The slowest straggler among a running pod's ranks (of the newest attempt), if any."""
        if not self.stragglers or pod.phase.value != "Running" or pod.restart_attempt < self.latest_attempt:
            return None
        found = [self.stragglers[r] for r in (ranks or pod.ranks) if r in self.stragglers]
        return min(found, key=lambda s: s.speed) if found else None


RANK_ROW = "\x00rank"  # a row key's mark: the row of one more rank of the pod named before it
POD_MIN, POD_MOST = 7, 48  # the POD column: `<index>-<random>` at least; a whole name at most


def pod_cells_for(width: int, keys: tuple[str, ...]) -> int:
    """The POD column's width: what the other shown columns leave of `width`."""
    others = sum(cells + GAP for key, _, cells in COLUMNS if key in keys and key != "pod")
    return max(POD_MIN, min(POD_MOST, width - others - GAP))


def columns_for(width: int) -> tuple[str, ...]:
    """The columns that fit in `width` cells: DROP_ORDER's first go until the rest fit, then
    any of those that still fits comes back, the most telling first."""
    widths = {key: cells + GAP for key, _, cells in COLUMNS}
    keys = set(widths)
    dropped = []
    for key in DROP_ORDER:
        if sum(widths[k] for k in keys) <= width:
            break
        keys.discard(key)
        dropped.append(key)
    for key in reversed(dropped):
        if sum(widths[k] for k in keys) + widths[key] <= width:
            keys.add(key)
    return tuple(key for key, _, _ in COLUMNS if key in keys)
