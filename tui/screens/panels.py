"""The panels (the step card, pods, logs, timeline, loss, checkpoints, nodes) and how they share
the screen. Imported and mounted just after the first paint: their widgets (DataTable, TextArea, Log,
Select, plotext) are most of what the cockpit would otherwise import and lay out first.

The step card is not among them on the right: it sits under the checklist and takes the rows
the checklist leaves (`Panels.card`, mounted there by the screen), so a short checklist leaves no
empty column and a long step reads whole. Two arrangements of the others, never two copies:
- "grid" (120x36 and larger): pods, logs, failure timeline and loss at once, so a kill, the
  restart, the resumed line and the recovery are seen together without a key. Checkpoints, which
  nobody watches live, show zoomed on request (4).
- "tabs" (smaller, 80x24 over SSH): one panel at a time under a tab bar; the step card beside them
  shows its heading, done-when and keys, and shows whole zoomed (1 or z).
A zoomed panel (z) fills the body in either arrangement. The nodes view is only ever shown zoomed
(N opens and closes it): it is about the cluster, not the followed job, and its table wants the
whole width. Whatever is hidden loses the focus, so a key never acts on a panel the learner
cannot see.
"""

from __future__ import annotations

from typing import Callable

from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Tab, Tabs

from tui.config import CockpitConfig
from tui.widgets.checkpoints import CheckpointsPanel
from tui.widgets.log_view import LogView
from tui.widgets.loss_chart import LossChart
from tui.widgets.message import WidgetMessage
from tui.widgets.nodes_table import NodesPanel
from tui.widgets.pods_table import PodsTable
from tui.widgets.rank_summary import RankSummary
from tui.widgets.step_view import StepView
from tui.widgets.timeline_view import TimelineView

# panel name → (widget id, tab label). Tab order is the key order (1-6).
PANELS: dict[str, tuple[str, str]] = {
    "step": ("step-view", "Step"),
    "pods": ("pods-panel", "Pods"),
    "logs": ("log-view", "Logs"),
    "checkpoints": ("ckpt-panel", "Checkpoints"),
    "loss": ("loss-chart", "Loss"),
    "timeline": ("timeline", "Timeline"),
    "nodes": ("nodes-panel", "Nodes"),
}
ZOOMED_ONLY = ("nodes",)  # never a tab nor in the grid: shown zoomed
CARD = "step"  # under the checklist, never a tab nor in the grid
GRID = ("pods", "timeline", "logs", "loss")  # in grid order; the timeline and the logs span two rows
GRID_MIN = (120, 36)  # the terminal size from which everything fits on one screen


def arrangement_for(width: int, height: int) -> str:
    return "grid" if width >= GRID_MIN[0] and height >= GRID_MIN[1] else "tabs"


class Panels(Container):
    DEFAULT_CSS = """
    Panels { width: 1fr; height: 1fr; }
    Panels.-grid {
        layout: grid;
        grid-size: 2 3;
        grid-columns: 3fr 2fr;
        grid-rows: 1fr 1fr 1fr;
    }
    Panels.-grid > #log-view, Panels.-grid > #timeline { row-span: 2; }
    Panels > .panel { height: 1fr; }
    #panel-tabs { height: 2; }
    """

    arrangement: reactive[str] = reactive("tabs", init=False)
    active: reactive[str] = reactive("pods", init=False)  # the tab shown in the tabs arrangement
    zoomed: reactive[str | None] = reactive(None, init=False)

    class Shown(WidgetMessage):
        """A panel came into view (a tab chosen, zoomed, or the arrangement changed)."""

        def __init__(self, widget: Widget, name: str) -> None:
            super().__init__(widget)
            self.name = name

    def __init__(self, config: CockpitConfig, clock: Callable[[], float], **kwargs) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.clock = clock
        # Mounted by the screen under the checklist; shown, focused and zoomed as a panel.
        self.card = StepView(clock=clock, id="step-view", classes="panel")

    def compose(self) -> ComposeResult:
        yield Tabs(*(Tab(label, id=name) for name, (_, label) in PANELS.items()
                     if name not in ZOOMED_ONLY and name != CARD), id="panel-tabs")
        # In grid order (the grid places them as they come): pods and, below them, the logs in
        # the wide column; the timeline and, below it, the loss in the narrow one.
        with Vertical(id="pods-panel", classes="panel") as pods:
            pods.border_title = "pods"
            pods.border_subtitle = "ctrl+k kill · enter logs"
            yield RankSummary(id="rank-summary")
            yield PodsTable(clock=self.clock, id="pods-table")
        yield TimelineView(id="timeline", classes="panel")
        yield LogView(capacity=self.config.log_lines, id="log-view", classes="panel")
        yield LossChart(id="loss-chart", classes="panel")
        yield CheckpointsPanel(clock=self.clock, id="ckpt-panel", classes="panel")
        with NodesPanel(id="nodes-panel", classes="panel") as nodes:
            nodes.border_title = "nodes"
            nodes.border_subtitle = "x fail · u restore · C cordon · N close"

    def on_mount(self) -> None:
        self.arrangement = arrangement_for(*self.app.size)
        self._arrange()

    # ------------------------------------------------------------------ asked by the screen

    def panel(self, name: str) -> Widget:
        return self.card if name == CARD else self.query_one(f"#{PANELS[name][0]}")

    def is_shown(self, name: str) -> bool:
        if self.zoomed is not None:
            return name == self.zoomed
        if name == CARD:
            return True
        if self.arrangement == "grid":
            return name in GRID
        return name == self.active

    def shown(self) -> list[str]:
        return [name for name in PANELS if self.is_shown(name)]

    def show(self, name: str, focus: bool = True) -> None:
        """Bring a panel into view (a tab, or zoomed when the grid has no place for it), and
        give it the keys."""
        if self.zoomed is not None and self.zoomed != name:
            self.zoomed = None
        if name == CARD:
            if self.arrangement == "tabs":
                self.zoomed = name  # beside the tabs the card shows only its head: whole, it is zoomed
        elif name in ZOOMED_ONLY:
            self.zoomed = name
        elif self.arrangement == "tabs":
            self.active = name
        elif name not in GRID:
            self.zoomed = name
        if focus:
            self.focus_panel(name)

    def toggle_zoom(self, name: str | None = None) -> None:
        """Zoom `name`, else the focused panel (the checklist's focus zooms the step card), or
        put the zoomed one back."""
        name = name or self.panel_of(self.app.focused) or self.zoomed or CARD
        self.zoomed = None if self.zoomed == name else name
        self.focus_panel(name)

    def follow(self, job: str) -> None:
        """Another job followed: every panel that shows one job starts over with it."""
        self.panel("pods").border_title = Content(f"pods · {job}")  # the cluster's name: plain text
        self.query_one(PodsTable).reset(job)
        self.query_one(LogView).reset(job)
        self.query_one(TimelineView).reset(job)
        self.query_one(LossChart).follow_run(job)

    def focus_panel(self, name: str) -> None:
        target = self.panel(name)
        inner = {"pods": "#pods-table", "logs": "#log-lines", "checkpoints": "#ckpt-table",
                 "nodes": "#nodes-table"}.get(name)
        if inner is not None:
            target = target.query_one(inner)
        if not _hidden(target):
            self.screen.set_focus(target)  # now: keys typed right after go to it
        else:
            self.call_after_refresh(target.focus)  # once it is displayed: hidden widgets refuse focus

    def panel_of(self, widget: Widget | None) -> str | None:
        """The panel a widget (the focused one) sits in, or None outside the panels."""
        ids = {wid: name for name, (wid, _) in PANELS.items()}
        while widget is not None and widget is not self.screen:
            if widget.id in ids:
                return ids[widget.id]
            widget = widget.parent
        return None

    # ------------------------------------------------------------------ drawing the arrangement

    def watch_arrangement(self) -> None:
        self._arrange()

    def watch_active(self, name: str) -> None:
        tabs = self.query_one(Tabs)
        if tabs.active != name:
            tabs.active = name
        self._arrange()

    def watch_zoomed(self) -> None:
        self._arrange()

    def _arrange(self) -> None:
        grid = self.arrangement == "grid" and self.zoomed is None
        self.set_class(grid, "-grid")
        self.query_one(Tabs).display = self.arrangement == "tabs" and self.zoomed is None
        for name in PANELS:
            shown = self.is_shown(name)
            panel = self.panel(name)
            if panel.display != shown:
                panel.display = shown
                if shown:
                    self.post_message(self.Shown(self, name))
            elif name == self.zoomed == CARD:
                self.post_message(self.Shown(self, name))  # in view already, beside: now whole
        focused = self.app.focused
        if focused is not None and self.panel_of(focused) is not None and _hidden(focused):
            self.focus_panel(self.zoomed or (self.active if self.arrangement == "tabs" else CARD))

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        event.stop()
        if event.tab is not None and event.tab.id in PANELS and self.arrangement == "tabs":
            self.active = event.tab.id


def _hidden(widget: Widget) -> bool:
    node = widget
    while node is not None:
        if not getattr(node, "display", True):
            return True
        node = node.parent
    return False
