"""Loss curves, one per run: the followed job live (from its rank-0 step lines) and finished runs
(from their metrics.json). Redraws at most a few times a second, and only when it is on screen:
plotting is the slowest thing this screen draws."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

if TYPE_CHECKING:
    from backend.models import LogLine, RunMetrics

REDRAW_SECONDS = 0.5
MAX_POINTS = 4000  # per run; beyond it every other point goes (the curve's shape stays, memory is bounded)
# Distinct markers keep runs apart where colour is gone (NO_COLOR, a washed-out projector).
MARKERS = ("braille", "dot", "+", "x", "o")


class LossChart(Vertical, can_focus=True):
    DEFAULT_CSS = """
    #loss-empty { padding: 1; color: $text-muted; }
    #loss-plot { height: 1fr; }
    """
    BORDER_TITLE = "loss"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: dict[str, dict[int, float]] = {}  # run → step → loss (a resumed step overwrites)
        self.live_run: str | None = None
        self._dirty = False

    def compose(self) -> ComposeResult:
        yield Static("no loss yet: run a training step", id="loss-empty")
        yield PlotextPlot(id="loss-plot")

    def on_mount(self) -> None:
        self.query_one("#loss-plot").display = False
        self.set_interval(REDRAW_SECONDS, self._redraw_if_needed)

    # ------------------------------------------------------------------ method calls down

    def follow_run(self, run: str | None) -> None:
        self.live_run = run
        if run is not None:
            self.series.setdefault(run, {})
        self._dirty = True

    def add_lines(self, batch: Iterable["LogLine"]) -> None:
        """Rank 0's step lines of the followed job (every rank prints the same all-reduced loss)."""
        run = self.live_run
        if run is None:
            return
        points = self.series.setdefault(run, {})
        for line in batch:
            if line.loss is not None and line.rank == 0 and line.step is not None:
                points[line.step] = line.loss
                self._dirty = True
        if len(points) > MAX_POINTS:
            self.series[run] = {s: points[s] for s in sorted(points)[::2]}

    def set_finished_runs(self, metrics: Iterable["RunMetrics"]) -> None:
        for m in metrics:
            if m.run == self.live_run and self.series.get(m.run):
                continue  # the live curve has every step already
            if m.loss_history:
                self.series[m.run] = {i + 1: v for i, v in enumerate(m.loss_history)}
                self._dirty = True
        if self._dirty:  # finished runs arrive once: draw them now, not at the next tick
            self.call_after_refresh(self._redraw_if_needed)

    # ------------------------------------------------------------------ drawing

    def _redraw_if_needed(self) -> None:
        if self._dirty and self.is_on_screen:
            self.redraw()

    def redraw(self) -> None:
        self._dirty = False
        runs = {run: points for run, points in self.series.items() if points}
        plot = self.query_one("#loss-plot", PlotextPlot)
        self.query_one("#loss-empty").display = not runs
        plot.display = bool(runs)
        if not runs:
            return
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        for i, (run, points) in enumerate(sorted(runs.items(), key=lambda kv: kv[0] != self.live_run)):
            steps = sorted(points)
            label = f"{run} (followed)" if run == self.live_run else run
            plt.plot(steps, [points[s] for s in steps], label=label, marker=MARKERS[i % len(MARKERS)])
        plt.xlabel("step")
        plt.ylabel("loss")
        plot.refresh()

    @property
    def is_on_screen(self) -> bool:
        return self.display and self.region.area > 0
