"""The loss chart on its own (no cluster): a marker where a restarted group resumed, none for a
replayed stream, and the legend in a line of its own under the plot, never drawn on the curve."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual_plotext import PlotextPlot

from backend.models import LogLine, RunMetrics
from tui.widgets.loss_chart import OTHER_RUNS, LossChart, thinned

POD0, POD0_AGAIN = "job-node-0-0-aaaaa", "job-node-0-0-ccccc"


def step(pod: str, at: float, n: int, rank: int = 0) -> LogLine:
    return LogLine.parsed(pod, rank, at, f"step={n} loss={1 / n:.6f} rank={rank} world=2")


class ChartApp(App):
    def compose(self) -> ComposeResult:
        yield LossChart()


def killed_at_8_resumed_from_5() -> list[LogLine]:
    first = [step(POD0, 100.0 + n, n) for n in range(1, 9)] + [step("job-node-0-1-bbbbb", 100.0 + n, n, 1)
                                                               for n in range(1, 9)]
    resumed = LogLine.parsed(POD0_AGAIN, 0, 120.0, "event=resumed from_step=5 rank=0 world=2 checkpoint_world=2")
    return first + [resumed] + [step(POD0_AGAIN, 120.0 + n, n) for n in range(6, 12)]


async def test_a_restart_is_marked_where_the_group_resumed_and_the_legend_is_off_the_plot():
    app = ChartApp()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = await drawn_chart(app, pilot, killed_at_8_resumed_from_5())
        assert chart.restarts["job"] == {5}
        assert sorted(chart.series["job"]) == list(range(1, 12))  # the curve goes on past the marker
        plot = chart.query_one("#loss-plot", PlotextPlot)
        assert plot.plt._active.monitor.vcoord[0] == [5]  # one vertical line, at the resumed step
        legend = chart.query_one("#loss-legend").render()
        assert "job (followed)" in str(legend) and "restart, resumed from step 5" in str(legend)
        drawn = plot.plt.build()
        assert "job" not in drawn and "followed" not in drawn  # no legend over the data
        assert legend_below_plot(chart)


async def test_a_restart_from_scratch_is_marked_and_a_replayed_stream_is_not():
    app = ChartApp()
    async with app.run_test(size=(100, 30)):
        chart = app.query_one(LossChart)
        chart.follow_run("job")
        first = [step(POD0, 100.0 + n, n) for n in range(1, 6)]
        chart.add_lines(first)
        chart.add_lines(first)  # the log stream reopened and sent the job's lines again
        assert chart.restarts["job"] == set()
        chart.add_lines([step(POD0_AGAIN, 200.0 + n, n) for n in range(1, 4)])  # no checkpoint: step 1 again
        assert chart.restarts["job"] == {0}


def steps(last: int) -> list:
    """Rank 0's step lines 1..last, a second apart."""
    return [step(POD0, 100.0 + n, n) for n in range(1, last + 1)]


async def drawn_chart(app, pilot, lines: list) -> LossChart:
    """The app's chart following "job" with `lines` added, drawn."""
    chart = app.query_one(LossChart)
    chart.follow_run("job")
    chart.add_lines(lines)
    chart.redraw()
    await pilot.pause()
    return chart


def legend_below_plot(chart: LossChart) -> bool:
    plot, legend = chart.query_one("#loss-plot").region, chart.query_one("#loss-legend").region
    return legend.height >= 1 and legend.y >= plot.bottom


async def test_a_redraw_with_the_same_legend_does_not_lay_out_the_screen():
    app = ChartApp()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = await drawn_chart(app, pilot, steps(5))
        layouts = []
        refresh_layout = app.screen._refresh_layout
        app.screen._refresh_layout = lambda *a, **k: (layouts.append(1), refresh_layout(*a, **k))[1]
        for n in range(6, 9):  # new points, the same runs and restarts: the plot changes, the legend not
            chart.add_lines([step(POD0, 100.0 + n, n)])
            chart.redraw()
            await pilot.pause()
        assert layouts == []


def finished(run: str, written: float, steps: int = 10) -> RunMetrics:
    return RunMetrics(run=run, final_loss=1 / steps, steps=steps, world_size=2, wall_seconds=1.0,
                      loss_history=[1 / n for n in range(1, steps + 1)], written=written)


async def test_one_curve_per_run_the_followed_jobs_own_file_included_and_only_the_newest_others():
    app = ChartApp()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = app.query_one(LossChart)
        chart.follow_run("lesson-ray")
        chart.add_lines(killed_at_8_resumed_from_5())  # two workers, two attempts: one run
        older = [finished(f"lesson-{i}", written=100.0 + i) for i in range(6)]
        # Ray Train writes the followed job's metrics under <storage>/<run name>: the same run
        chart.set_finished_runs([*older, finished("lesson-ray/ray-20261130-1", written=200.0)])
        chart.redraw()
        await pilot.pause()
        plot = chart.query_one("#loss-plot", PlotextPlot)
        assert plot.plt._active.monitor.signals == 1 + OTHER_RUNS
        assert sorted(chart.series["lesson-ray"]) == list(range(1, 12))  # the live curve, past the restart
        legend = str(chart.query_one("#loss-legend").render())
        assert "lesson-ray (followed)" in legend and "ray-20261130-1" not in legend
        assert all(f"lesson-{i}" in legend for i in (5, 4, 3)) and "lesson-2" not in legend  # the newest
        assert f"+{6 - OTHER_RUNS} older runs not drawn" in legend


async def test_a_job_followed_after_it_finished_is_drawn_from_its_file_once():
    app = ChartApp()
    async with app.run_test(size=(100, 30)):
        chart = app.query_one(LossChart)
        chart.set_finished_runs([finished("lesson-ray/ray-1", written=1.0), finished("lesson-ray/ray-2", 2.0, 12)])
        chart.follow_run("lesson-ray")
        assert list(chart.series) == ["lesson-ray"] and len(chart.series["lesson-ray"]) == 12  # the newest run
        chart.add_lines([step(POD0, 100.0 + n, n) for n in range(1, 4)])  # a new run of the job: its lines only
        assert sorted(chart.series["lesson-ray"]) == [1, 2, 3]


def test_a_long_curve_is_thinned_to_what_the_plot_can_show_keeping_its_ends_and_extremes():
    xs = list(range(1, 4001))
    ys = [1 / n + (0.3 if n == 2345 else 0.0) - (0.2 if n == 3001 else 0.0) for n in xs]  # a spike, a dip
    kept_x, kept_y = thinned(xs, ys, columns=100)
    assert len(kept_x) <= 4 * 100 and kept_x == sorted(kept_x)
    assert (kept_x[0], kept_x[-1]) == (1, 4000)  # the same x range: the same axis
    assert 2345 in kept_x and 3001 in kept_x  # a column's highest and lowest stay
    assert (min(kept_y), max(kept_y)) == (min(ys), max(ys))
    assert all(ys[x - 1] == y for x, y in zip(kept_x, kept_y))


async def test_a_long_run_hands_plotext_a_bounded_number_of_points():
    app = ChartApp()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = await drawn_chart(app, pilot, steps(3000))
        plot = chart.query_one("#loss-plot", PlotextPlot)
        drawn = plot.plt._active.monitor.x[0]
        assert plot.size.width == chart.size.width  # what the curve was thinned for
        assert len(drawn) <= 4 * 2 * plot.size.width and (drawn[0], drawn[-1]) == (1, 3000)


def screen_text(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_in_the_narrow_grid_panel_the_axis_keeps_its_last_label_and_the_legend_names_runs_whole():
    """The loss panel of the one-screen grid at 120x40 is ~36 cells wide: plotext dropped the last
    x label (1299.0 did not fit) and the legend, cut at three rows, ended "+1 older"."""
    from tui.widgets.loss_chart import step_ticks

    app = ChartApp()
    async with app.run_test(size=(36, 14)) as pilot:
        chart = app.query_one(LossChart)
        chart.follow_run("lesson-scale-2w-a1b2c3")
        chart.add_lines([step(POD0, float(n), n) for n in range(1, 1300)])
        chart.set_finished_runs([RunMetrics(run=name, final_loss=0.1, steps=40, world_size=1, wall_seconds=3.0,
                                            loss_history=[0.5, 0.2, 0.1], written=float(i))
                                 for i, name in enumerate(("lesson-ddp", "lesson-resume-d4e5f6",
                                                           "lesson-scale-1w-aaaaaa", "lesson-resume-zzzzzz"))])
        chart.redraw()
        await pilot.pause()
        text = screen_text(app)
        axis = next(i for i, line in enumerate(text) if "└" in line)
        ticks = [i for i, c in enumerate(text[axis]) if c == "┬"]
        labels = text[axis + 1].split()
        assert labels == [str(t) for t in step_ticks(1, 1299, 36 - 5)] and len(labels) == len(ticks) >= 2
        legend = [line.strip() for line in text[axis + 3:] if line.strip()]
        assert legend[-1] == "+3 older runs not drawn"  # whole, and what it counts is not drawn
        assert legend[0].startswith("⠒ ") and legend[0].endswith("(followed)")
        assert legend[1] == "• lesson-resume-zzzzzz"  # the newest other run, its name whole


async def test_a_run_that_is_no_job_is_drawn_from_its_rank_0_lines():
    """Step 3 trains in two processes on this machine, no job followed: its curve still shows."""
    app = ChartApp()
    async with app.run_test(size=(80, 20)) as pilot:
        chart = app.query_one(LossChart)
        for n in range(1, 41):
            chart.add_point("step 3 run", n, 1 / n, at=float(n))
        chart.redraw()
        await pilot.pause()
        assert not chart.query_one("#loss-empty").display
        assert "step 3 run" in str(chart.query_one("#loss-legend").render())


async def test_the_loss_labels_are_evenly_apart():
    """A run from 0.78 down to 0.05: plotext labelled `0.78 0.66 0.54 0.29 0.17 0.05` (0.41
    skipped); the labels are now values a fixed gap apart, all with the same decimals."""
    app = ChartApp()
    async with app.run_test(size=(40, 24)) as pilot:
        chart = app.query_one(LossChart)
        chart.follow_run("job")
        chart.add_lines([LogLine.parsed(POD0, 0, float(n), f"step={n} loss={0.78 - 0.73 * n / 60:.6f} rank=0 world=2")
                         for n in range(0, 61)])
        chart.redraw()
        await pilot.pause()
        labels = [line.split("┤")[0].strip() for line in screen_text(app) if "┤" in line]
        labels = [label for label in labels if label]
        assert len(labels) >= 3, labels
        values = [float(label) for label in labels]
        gaps = {round(a - b, 6) for a, b in zip(values, values[1:])}
        assert len(gaps) == 1, labels
        assert len({len(label.split(".")[-1]) for label in labels}) == 1, labels


def test_loss_ticks_are_round_values_a_fixed_gap_apart():
    from tui.widgets.loss_chart import loss_ticks

    assert [label for _, label in loss_ticks(0.05, 0.78, 6)] == ["0.2", "0.4", "0.6"]
    assert [label for _, label in loss_ticks(0.05, 0.78, 9)] == ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7"]
