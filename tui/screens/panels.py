"""The right-hand tabs (step, pods, logs, checkpoints, loss). Imported and mounted just after the
first paint: their widgets (DataTable, TextArea, Log, Select, plotext) are most of what the
cockpit would otherwise import and lay out before it shows anything."""

from __future__ import annotations

from typing import Callable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import TabbedContent, TabPane

from tui.config import CockpitConfig
from tui.widgets.checkpoints import CheckpointsPanel
from tui.widgets.log_view import LogView
from tui.widgets.loss_chart import LossChart
from tui.widgets.pods_table import PodsTable
from tui.widgets.step_view import StepView


class Panels(Vertical):
    def __init__(self, config: CockpitConfig, clock: Callable[[], float], **kwargs) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.clock = clock

    def compose(self) -> ComposeResult:
        with TabbedContent(id="tabs", initial="step"):
            with TabPane("Step", id="step"):
                yield StepView(clock=self.clock, id="step-view")
            with TabPane("Pods", id="pods"):
                with Vertical(id="pods-panel") as pods:
                    pods.border_title = "pods"
                    pods.border_subtitle = "ctrl+k kill · enter logs"
                    yield PodsTable(clock=self.clock, id="pods-table")
            with TabPane("Logs", id="logs"):
                yield LogView(capacity=self.config.log_lines, id="log-view")
            with TabPane("Checkpoints", id="checkpoints"):
                yield CheckpointsPanel(clock=self.clock, id="ckpt-panel")
            with TabPane("Loss", id="loss"):
                yield LossChart(id="loss-chart")
