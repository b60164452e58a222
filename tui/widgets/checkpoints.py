"""Checkpoints on a volume (step, loss, world size, size, valid) and the volume's snapshots.
The learner marks two snapshots (space) to compare them side by side (c).

Run, snapshot and volume names are shown whole (a name cut to "lesson-resume-" no longer says
which run it was): their columns are as wide as their longest name, and the volume list is as
wide as its longest name up to half the panel, past which a name loses its middle, not its end.
Everything here is the cluster's text, shown plain."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Select, Static

from backend.words import count
from tui.model import format as fmt
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.message import WidgetMessage

if TYPE_CHECKING:
    from backend.models import Checkpoint, Snapshot, VolumeInfo

# Most telling first: at 80 columns the last ones scroll off to the right. None: as wide as the
# widest value (a name).
CHECKPOINT_COLUMNS = (
    ("run", "RUN", None),
    ("step", "STEP", 5),
    ("loss", "LOSS", 8),
    ("valid", "VALID", 5),
    ("world", "WORLD", 5),
    ("size", "SIZE", 9),
    ("age", "AGE", 5),
)
SNAPSHOT_COLUMNS = (
    ("mark", "", 1),
    ("name", "SNAPSHOT", None),
    ("volume", "VOLUME", None),
    ("runs", "RUNS", 4),
    ("size", "SIZE", 9),
    ("age", "AGE", 5),
)


def checkpoint_cells(c: "Checkpoint", now: float) -> tuple:
    valid = Text("yes", style="green") if c.valid else Text("NO", style="bold red")
    return (c.run or "/", str(c.step), fmt.loss(c.loss), valid, str(c.world_size), fmt.size(c.size_bytes),
            fmt.age(now - c.created) if c.created else "-")


class SnapshotTable(KeyedTable):
    BINDINGS = [Binding("space", "toggle_mark", "Mark for compare", show=False)]

    def __init__(self, **kwargs) -> None:
        super().__init__(SNAPSHOT_COLUMNS, **kwargs)
        self.marked: list[str] = []  # at most two, oldest mark first

    def action_toggle_mark(self) -> None:
        key = self.selected_key
        if key is None:
            return
        if key in self.marked:
            self.marked.remove(key)
        else:
            self.marked = (self.marked + [key])[-2:]
        for name in self.keys:
            self.update_cell(name, "mark", "●" if name in self.marked else " ")


class CheckpointsPanel(Vertical):
    DEFAULT_CSS = """
    #ckpt-bar { height: auto; }  /* the summary wraps: its reason (a torn file's problem) read whole */
    #ckpt-volume { width: 24; max-width: 50%; }
    /* focused, the selector says so plainly (the compact Select's own focus is a shade apart) */
    #ckpt-volume:focus > SelectCurrent { background: $accent; color: auto 90%; text-style: bold; }
    #ckpt-summary { width: 1fr; height: auto; padding-left: 1; }
    #ckpt-table, #snap-table { height: 1fr; scrollbar-size: 1 1; }
    #snap-title { height: 2; border-top: solid $secondary; }
    """
    BORDER_TITLE = "checkpoints"
    # One Tab from the checkpoints to the volume selector, then to the snapshots, and back: in
    # the order of the screen the selector comes before the table that has the panel's focus.
    BINDINGS = [Binding("tab", "cycle_focus(1)", show=False), Binding("shift+tab", "cycle_focus(-1)", show=False)]
    FOCUS_ORDER = ("#ckpt-table", "#ckpt-volume", "#snap-table")
    AGE_SECONDS = 1.0  # the AGE columns tick while shown

    @dataclass
    class VolumeChosen(WidgetMessage):
        volume: str

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.volume: str | None = None
        self.picked = False  # the learner chose the volume: a followed job's does not replace it
        self.snapshots: dict[str, "Snapshot"] = {}
        self._checkpoints: list["Checkpoint"] = []  # the shown volume's, for the AGE tick

    def on_mount(self) -> None:
        self.set_interval(self.AGE_SECONDS, self._tick)

    def _tick(self) -> None:
        if self.region.width == 0 or self.volume is None:  # not on screen
            return
        self.show_checkpoints(self.volume, self._checkpoints)
        self.show_snapshots(list(self.snapshots.values()))

    def action_cycle_focus(self, step: int) -> None:
        focused = self.app.focused
        order = [self.query_one(selector) for selector in self.FOCUS_ORDER]
        here = next((i for i, widget in enumerate(order) if widget is focused), None)
        if here is None:  # inside the selector's open list: Tab is the list's
            self.app.action_focus_next() if step > 0 else self.app.action_focus_previous()
            return
        order[(here + step) % len(order)].focus()

    def compose(self) -> ComposeResult:
        with Horizontal(id="ckpt-bar"):
            yield Select[str]([], prompt="volume", id="ckpt-volume", compact=True, allow_blank=True)
            yield Static("", id="ckpt-summary")
        yield KeyedTable(CHECKPOINT_COLUMNS, id="ckpt-table")
        yield Static("snapshots · space mark · c compare · s take", id="snap-title",
                     classes="subtitle")
        yield SnapshotTable(id="snap-table")

    # ------------------------------------------------------------------ method calls down

    def show_volumes(self, volumes: Iterable["VolumeInfo"], preferred: str | None = None) -> None:
        """The volumes to choose from; the one shown is the learner's choice, else `preferred`
        (the followed job's), else the first."""
        names = [v.name for v in volumes]
        select = self.query_one("#ckpt-volume", Select)
        widest = max((len(n) for n in names), default=0)
        select.styles.width = max(24, widest + 4)  # the name, its arrow and padding; CSS caps it
        room = max(8, min(widest, self.size.width // 2 - 4)) if self.size.width else widest
        select.set_options([(Content(fmt.fit(n, room)), n) for n in names])
        if self.volume in names and (self.picked or preferred not in names):
            wanted = self.volume
        else:
            wanted = preferred if preferred in names else (names[0] if names else None)
        if wanted is not None:
            select.value = wanted
            if wanted != self.volume:
                self.volume = wanted
                self.post_message(self.VolumeChosen(self, wanted))
        else:
            self.query_one("#ckpt-summary", Static).update(Content("no volumes yet"))

    def show_checkpoints(self, volume: str, checkpoints: list["Checkpoint"]) -> None:
        if volume != self.volume:
            return  # an answer for a volume the learner has left
        now = self.clock()
        self._checkpoints = checkpoints
        ordered = sorted(checkpoints, key=lambda c: (c.run, c.step))
        self.query_one("#ckpt-table", KeyedTable).sync(
            {c.path: checkpoint_cells(c, now) for c in ordered})
        valid = [c for c in checkpoints if c.valid]
        newest = max(valid, key=lambda c: c.step, default=None)
        summary = count(len(checkpoints), "file")
        if newest is not None:
            summary += f" · newest valid step {newest.step}"
        broken = [c for c in ordered if not c.valid]
        if broken:
            summary += f" · {len(broken)} invalid (step {broken[0].step}: {broken[0].problem or 'unreadable'})"
        self.query_one("#ckpt-summary", Static).update(Content(summary))

    def show_snapshots(self, snapshots: list["Snapshot"]) -> None:
        now = self.clock()
        table = self.query_one("#snap-table", SnapshotTable)
        self.snapshots = {s.name: s for s in snapshots}
        table.marked = [m for m in table.marked if m in self.snapshots]
        table.sync({s.name: ("●" if s.name in table.marked else " ", s.name, s.volume,
                             str(len(s.metrics)), fmt.size(s.size_bytes), fmt.age(now - s.created))
                    for s in sorted(snapshots, key=lambda s: s.created)})

    def compare_pair(self) -> tuple[str, str] | None:
        """The two marked snapshots; else the highlighted one and the one before it; else the newest two."""
        table = self.query_one("#snap-table", SnapshotTable)
        if len(table.marked) == 2:
            return table.marked[0], table.marked[1]
        names = table.keys
        if len(names) < 2:
            return None
        selected = table.selected_key
        if len(table.marked) == 1:
            other = selected if selected not in table.marked else None
            other = other or next(n for n in reversed(names) if n != table.marked[0])
            return table.marked[0], other
        if selected is not None and names.index(selected) > 0:
            return names[names.index(selected) - 1], selected
        return names[-2], names[-1]

    @on(Select.Changed, "#ckpt-volume")
    def _volume_changed(self, event: Select.Changed) -> None:
        event.stop()
        value = self.query_one("#ckpt-volume", Select).value
        if isinstance(value, str) and value != self.volume:
            self.volume, self.picked = value, True
            self.post_message(self.VolumeChosen(self, value))
