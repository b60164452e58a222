"""Loss curves, one per run: the followed job live (from its rank-0 step lines: every worker and
every restart attempt of the job is one curve) and finished runs (from their metrics.json).
Redraws at most once a second, only when its data changed and it is on screen: plotting is the
slowest thing this screen draws, and its cost grows with the points handed to plotext (every
segment is drawn), so a curve with many more points than the plot has pixel columns is thinned to the
first, lowest, highest and last point of each column first (`thinned`): the curve looks the same
(a cell's dots may differ where a column straddles two cells), at a cost bounded by the plot's
width, not the run's length (4000 points on a 50-column plot: 5x faster, and a draw blocks keys).

The followed job's own metrics.json (`<job>`, or Ray Train's `<job>/<run name>`) is its curve, not
another one: it fills the curve of a job that finished before it was followed, and its first live
line replaces what came from there. A checkpoint volume holds every run of the lesson; beside the
followed one only the newest OTHER_RUNS are drawn, faint, and the legend counts the rest: seven
curves on one small plot is a tangle, not a comparison.

A restart of the followed job is a vertical line at the step its new group resumed from (the
workers' `event=resumed from_step=N`, or a step that comes again without one: a restart from
scratch), so the curve is seen to continue past it. The legend is a line of its own under the
plot, never drawn on the data: plotext puts its legend in a corner of the canvas, over the curve."""

from __future__ import annotations

import math

from bisect import bisect_left
from typing import TYPE_CHECKING, Iterable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static
from textual_plotext import PlotextPlot

from tui.model.format import fit
from backend.words import count

if TYPE_CHECKING:
    from backend.models import LogLine, RunMetrics

# A redraw repaints the whole plot, a coloured braille cell at a time: ~3 kB at the grid's size,
# 6 kB/s at two a second while a job steps (bench/tui_bytes.py). A curve read by a person moves
# well enough once a second.
REDRAW_SECONDS = 1.0
MAX_POINTS = 4000  # per run; beyond it every other point goes (the curve's shape stays, memory is bounded)
# Distinct markers keep runs apart where colour is gone (NO_COLOR, a washed-out projector).
MARKERS = ("braille", "dot", "+", "x", "o")
# How each marker reads in the legend line (plotext draws "dot" as •, braille as dots in a cell).
MARKER_GLYPHS = {"braille": "⠒", "dot": "•"}
RESTART_GLYPH = "│"
OTHER_RUNS = 3  # finished runs drawn beside the followed one (the newest by their metrics.json)
Y_AXIS_CELLS = 5  # what the loss labels and the axis take of the plot's width ("0.44┤")
PIXELS_PER_CELL = 2  # braille, the finest marker: two pixel columns per cell
POINTS_PER_COLUMN = 4 * PIXELS_PER_CELL  # what `thinned` keeps at most: below it, nothing to gain


# Curve colours given explicitly (textual-plotext's own sequence) so the legend line can show them.
CURVE_COLOURS = ((0, 130, 200), (60, 180, 75), (230, 25, 75), (245, 130, 48), (145, 30, 180),
                 (70, 240, 240), (240, 50, 230), (128, 128, 128))


def _from_step(text: str) -> int | None:
    from training.logfmt import parse_line

    try:
        return int(parse_line(text)["from_step"])
    except (KeyError, ValueError):
        return None


class LossChart(Vertical, can_focus=True):
    DEFAULT_CSS = """
    #loss-empty { padding: 1; color: $text-muted; }
    #loss-plot { height: 1fr; }
    #loss-legend { height: auto; padding: 0 1; color: $text-muted; }
    """
    BORDER_TITLE = "loss"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: dict[str, dict[int, float]] = {}  # run → step → loss (a resumed step overwrites)
        self.live_run: str | None = None
        self.restarts: dict[str, set[int]] = {}  # run → steps a restarted group resumed from
        self.written: dict[str, float] = {}  # finished run → when its metrics.json was written
        self._from_metrics: set[str] = set()  # the followed curve came from metrics.json so far
        self._last: dict[str, tuple[float, int]] = {}  # run → (time, step) of its newest rank-0 line
        self._dirty = False
        self._legend: list = []
        self._drawn_for = (0, 0)  # the size the ticks, the legend and any thinned curve were drawn for

    def compose(self) -> ComposeResult:
        yield Static("no loss yet: run a training step", id="loss-empty")
        yield PlotextPlot(id="loss-plot")
        yield Static(id="loss-legend")

    def on_mount(self) -> None:
        self.query_one("#loss-plot").display = False
        self.query_one("#loss-legend").display = False
        self.set_interval(REDRAW_SECONDS, self._redraw_if_needed)

    # ------------------------------------------------------------------ method calls down

    def follow_run(self, run: str | None) -> None:
        self.live_run = run
        if run is not None:
            # The job's own runs read before it was followed are its curve now, not others.
            own = sorted((r for r in self.series if r != run and self._curve_of(r) == run),
                         key=lambda r: self.written.get(r, 0.0))
            if own and not self.series.get(run):
                self.series[run], self.written[run] = self.series[own[-1]], self.written.get(own[-1], 0.0)
                self._from_metrics.add(run)
            for r in own:
                del self.series[r]
                self.written.pop(r, None)
            self.series.setdefault(run, {})
            self.restarts.setdefault(run, set())
        self._dirty = True

    def forget(self, run: str) -> None:
        """A job deleted and applied again under this name is another job: its curve starts
        over (the old one's steps are not its, and its first step is no restart)."""
        self.series.pop(run, None)
        self.restarts.pop(run, None)
        self._last.pop(run, None)
        self.written.pop(run, None)
        self._from_metrics.discard(run)
        self._dirty = True

    def add_lines(self, batch: Iterable["LogLine"]) -> None:
        """Rank 0's step lines of the followed job (every rank prints the same all-reduced loss)."""
        run = self.live_run
        if run is None:
            return
        if run in self._from_metrics and any(line.step is not None and line.rank == 0 for line in batch):
            self._from_metrics.discard(run)  # live lines from now on: an older run's file is not this run
            self.series[run] = {}
        points = self.series.setdefault(run, {})
        restarts = self.restarts.setdefault(run, set())
        # (time, step) of the newest rank-0 line: a step that comes again later in time is a new
        # group; a stream reopened from the start replays older lines, which are no restart.
        last = self._last.get(run)
        for line in batch:
            if line.rank != 0 or (last is not None and line.time <= last[0]):
                if line.rank == 0 and line.step is not None and line.loss is not None:
                    points[line.step] = line.loss  # a replayed line: the curve, never a marker
                    self._dirty = True
                continue
            if line.step is not None and line.loss is not None:
                if last is not None and line.step <= last[1]:  # back without event=resumed: from scratch
                    restarts.add(line.step - 1)
                last = (line.time, line.step)
                points[line.step] = line.loss
                self._dirty = True
            elif "event=resumed" in line.text and (from_step := _from_step(line.text)) is not None:
                restarts.add(from_step)
                last = (line.time, from_step)
                self._dirty = True
        if last is not None:
            self._last[run] = last
        if len(points) > MAX_POINTS:
            self.series[run] = {s: points[s] for s in sorted(points)[::2]}

    def add_point(self, run: str, step: int, loss: float, at: float) -> None:
        """A step of a run that is no job on the cluster (step 3's two processes on this
        machine), from its rank-0 lines as the step prints them; drawn beside the followed job's."""
        if run == self.live_run:
            return
        self.series.setdefault(run, {})[step] = loss
        self.written[run] = at
        self._dirty = True

    def set_finished_runs(self, metrics: Iterable["RunMetrics"]) -> None:
        for m in sorted(metrics, key=lambda m: m.written or 0.0):  # the newest of a job's runs wins
            run = self._curve_of(m.run)
            if not m.loss_history or (run == self.live_run and run not in self._from_metrics
                                      and self.series.get(run)):
                continue  # the live curve has every step already
            if run == self.live_run:
                self._from_metrics.add(run)
            self.series[run] = {i + 1: v for i, v in enumerate(m.loss_history)}
            self.written[run] = m.written or 0.0
            self._dirty = True
        if self._dirty:  # finished runs arrive once: draw them now, not at the next tick
            self.call_after_refresh(self._redraw_if_needed)

    def _curve_of(self, run: str) -> str:
        """The curve a run directory belongs to: the followed job's own run is the followed curve."""
        live = self.live_run
        return live if live is not None and (run == live or live in run.split("/")) else run

    # ------------------------------------------------------------------ drawing

    def on_resize(self) -> None:
        # Ticks, legend rows and thinned curves drawn for another size (a zoom, or a draw before the
        # first layout: one tick at width 0) are drawn again at this size.
        if self._drawn_for != (self.size.width, self.size.height):
            self._dirty = True

    def _redraw_if_needed(self) -> None:
        if self._dirty and self.is_on_screen:
            self.redraw()

    def redraw(self) -> None:
        self._dirty = False
        runs = {run: points for run, points in self.series.items() if points}
        plot = self.query_one("#loss-plot", PlotextPlot)
        legend = self.query_one("#loss-legend", Static)
        self.query_one("#loss-empty").display = not runs
        plot.display = legend.display = bool(runs)
        if not runs:
            return
        followed = [self.live_run] if self.live_run in runs else []
        others = sorted((r for r in runs if r != self.live_run), key=lambda r: self.written.get(r, 0.0),
                        reverse=True)
        width = self.size.width  # the plot's, laid out or not yet (it is hidden until it has data)
        self._drawn_for = (width, self.size.height)
        restarts = sorted(self.restarts.get(self.live_run, ())) if followed else []
        # As many runs as the legend can name whole in its rows: a run drawn is a run named.
        shown = others[:OTHER_RUNS + (0 if followed else 1)]
        while True:
            rows = _legend_rows(self._keys(followed + shown, len(others) - len(shown), restarts, width - 2), width - 2)
            if len(rows) <= max(1, self.size.height // 4) or not shown or (not followed and len(shown) == 1):
                break
            shown = shown[:-1]
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        lo = hi = None
        for i, run in enumerate(followed + shown):
            points = runs[run]
            steps = sorted(points)
            losses = [points[s] for s in steps]
            lo, hi = min(steps[0], lo if lo is not None else steps[0]), max(steps[-1], hi or steps[-1])
            if width and len(steps) > POINTS_PER_COLUMN * width:
                steps, losses = thinned(steps, losses, PIXELS_PER_CELL * width)
            plt.plot(steps, losses, marker=MARKERS[i % len(MARKERS)], color=self._colour(i, run, followed))
        for step in restarts:
            plt.vline(step)
        ticks = step_ticks(lo, hi, width - Y_AXIS_CELLS)
        plt.xticks(ticks, [str(t) for t in ticks])
        drawn_losses = [loss for run in followed + shown for loss in runs[run].values()]
        y_ticks = loss_ticks(min(drawn_losses), max(drawn_losses), max(2, self.size.height // 3))
        plt.yticks([t for t, _ in y_ticks], [label for _, label in y_ticks])
        drawn_legend = [(row.plain, tuple(row.spans)) for row in rows]  # Content's == sees the text alone
        if drawn_legend != self._legend:  # an update lays the screen out: only when the legend changed
            self._legend = drawn_legend
            legend.update(Content("\n").join(rows))
        plt.xlabel("step")
        plt.ylabel("loss")
        plot.refresh()

    def _colour(self, i: int, run: str, followed: list[str]) -> tuple[int, int, int]:
        colour = CURVE_COLOURS[i % len(CURVE_COLOURS)]
        return _faint(colour) if followed and run != self.live_run else colour

    def _keys(self, drawn: list[str], not_drawn: int, restarts: list[int], width: int) -> list[Content]:
        """The legend's keys, each to be kept whole on a row: a run's marker and its name (one
        wider than the row loses its middle), the runs not drawn, the restart marker."""
        followed = [self.live_run] if drawn and drawn[0] == self.live_run else []
        keys = []
        for i, run in enumerate(drawn):
            marker = MARKERS[i % len(MARKERS)]
            suffix = " (followed)" if run == self.live_run else ""
            glyph = (MARKER_GLYPHS.get(marker, marker), f"bold rgb{self._colour(i, run, followed)}")
            name = (fit(run, max(8, width - 2 - len(suffix))), "bold" if suffix else "")
            keys.append(Content.assemble(glyph, " ", name, suffix))
        if not_drawn:
            keys.append(Content.styled(f"+{count(not_drawn, 'older run')} not drawn", "dim"))
        if restarts:
            keys.append(Content.assemble((RESTART_GLYPH, "bold"), " restart, resumed from step "
                                                                  f"{', '.join(map(str, restarts))}"))
        return keys

    @property
    def is_on_screen(self) -> bool:
        return self.display and self.region.area > 0


def _legend_rows(keys: list[Content], width: int) -> list[Content]:
    """Keys laid out in rows of `width` cells, three apart, never one split over two rows (a key
    wider than a row loses the middle of its name)."""
    rows: list[Content] = []
    row: Content | None = None
    for key in keys:
        if width > 0 and key.cell_length > width:
            key = key[: max(1, width - 1)] + "…"
        if row is not None and (width <= 0 or row.cell_length + 3 + key.cell_length <= width):
            row = row + "   " + key
        else:
            if row is not None:
                rows.append(row)
            row = key
    if row is not None:
        rows.append(row)
    return rows


def step_ticks(lo: int | None, hi: int | None, columns: int) -> list[int]:
    """Whole steps for the x axis, 1, 2 or 5 times a power of ten apart, as many as leave room
    between their labels, and none so near the right edge that its label would not fit (plotext
    leaves such a label out, and the axis ends unlabelled)."""
    if lo is None or hi is None:
        return []
    span = max(1, hi - lo)
    label = len(str(hi))
    most = max(2, columns // (label + 3))
    gap = next(g for g in (m * 10 ** e for e in range(12) for m in (1, 2, 5)) if span / g <= most - 1)
    ticks = list(range(-(-lo // gap) * gap, hi + 1, gap)) or [lo]
    room = max(1, columns - 1)
    fits = [t for t in ticks if (t - lo) / span * room + (len(str(t)) + 1) // 2 <= room]
    return fits or ticks[:1]


def loss_ticks(lo: float, hi: float, most: int) -> list[tuple[float, str]]:
    """Losses for the y axis, evenly apart (1, 2 or 5 times a power of ten, at most `most`),
    each with a label of as many decimals as the gap needs: plotext's own ticks are rounded
    apart unevenly (0.54 then 0.29) and skip a value a reader expects."""
    if hi <= lo:
        return [(lo, f"{lo:.2f}")]
    span = hi - lo
    gap = next(m * 10.0 ** e for e in range(-6, 7) for m in (1, 2, 5) if span / (m * 10.0 ** e) <= most - 1)
    decimals = max(0, -math.floor(math.log10(gap) + 1e-9))
    first = math.ceil(lo / gap - 1e-9)
    values = [round(k * gap, decimals) for k in range(first, math.floor(hi / gap + 1e-9) + 1)]
    return [(v, f"{v:.{decimals}f}") for v in values] or [(lo, f"{lo:.2f}")]


def thinned(xs: list[int], ys: list[float], columns: int) -> tuple[list[int], list[float]]:
    """The points of a curve (`xs` sorted) that a line plot `columns` pixels wide needs: per
    column of x, its first, lowest, highest and last point, in order. A line through them covers
    what a line through all of them covers (the column's span, and the same joins to its
    neighbours), and the x and y ranges, hence the axes, stay the same."""
    x0, span = xs[0], (xs[-1] - xs[0]) or 1
    keep: list[int] = []
    start = 0
    for column in range(1, columns + 1):
        # column c holds the x with (x - x0) * columns // span == c: its end is where the next begins
        end = bisect_left(xs, x0 - (-column * span // columns)) if column < columns else len(xs)
        if end <= start:
            continue
        part = ys[start:end]  # min, max and index over a slice: C loops, not a Python one per point
        keep += sorted({start, start + part.index(min(part)), start + part.index(max(part)), end - 1})
        start = end
    return [xs[i] for i in keep], [ys[i] for i in keep]


def _faint(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    """A finished run beside the followed one: the same hue, darker, so the followed curve leads."""
    return tuple(int(c * 0.55) for c in colour)  # type: ignore[return-value]
