"""The pods table on its own: rows come from watch events, workers first, a RayJob's driver last."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from backend.models import DRIVER_RANK, Pod, PodEvent, PodEventType, PodPhase
from tui.widgets.pods_table import PodsTable


class TableApp(App):
    def compose(self) -> ComposeResult:
        yield PodsTable(clock=lambda: 100.0, redraw_seconds=0)  # every change drawn at once


def pod(name: str, rank: int, attempt: int = 0) -> Pod:
    return Pod(name=name, job="ray-lesson", rank=rank, restart_attempt=attempt,
               phase=PodPhase.RUNNING, created=50.0)


async def test_the_driver_sorts_after_its_workers_and_shows_as_drv():
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(PodsTable)
        table.reset("ray-lesson")
        for p in (pod("ray-lesson-driver-aaaaa", DRIVER_RANK), pod("ray-lesson-worker-1-bbbbb", 1),
                  pod("ray-lesson-worker-0-ccccc", 0)):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=p))
        await pilot.pause()
        ranks = [table.get_row_at(i)[1].plain for i in range(table.row_count)]
        assert ranks == ["0", "1", "drv"]
        assert table.selected_pod == "ray-lesson-worker-0-ccccc"  # ctrl+k here kills a worker

        table.apply(PodEvent(type=PodEventType.ADDED, pod=pod("ray-lesson-worker-0-ddddd", 0, attempt=1)))
        await pilot.pause()
        attempts = [table.get_row_at(i)[2].plain for i in range(table.row_count)]
        assert attempts[0] == "1"  # the newest group on top


async def test_a_cursor_moved_down_follows_its_pod_through_a_resort():
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(PodsTable)
        table.reset("ray-lesson")
        for p in (pod("ray-lesson-worker-0-ccccc", 0), pod("ray-lesson-worker-1-bbbbb", 1)):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=p))
        table.focus()
        await pilot.press("down")
        assert table.selected_pod == "ray-lesson-worker-1-bbbbb"
        table.apply(PodEvent(type=PodEventType.ADDED, pod=pod("ray-lesson-driver-aaaaa", DRIVER_RANK)))
        table.apply(PodEvent(type=PodEventType.ADDED, pod=pod("ray-lesson-worker-0-ddddd", 0, attempt=1)))
        await pilot.pause()
        assert table.selected_pod == "ray-lesson-worker-1-bbbbb"


async def test_cpu_and_mem_fill_in_from_metrics_readings_and_show_unknown_without():
    from backend.models import PodUsage
    from tui.model.live import sample

    readings = [{"job-node-0-0-aaaaa": PodUsage(pod="job-node-0-0-aaaaa", cpu_cores=0.25, memory_bytes=1.2 * 2**30)},
                None]
    app = TableApp()
    async with app.run_test(size=(120, 10)) as pilot:
        table = app.query_one(PodsTable)
        table.reset("job")
        for name, rank in (("job-node-0-0-aaaaa", 0), ("job-node-0-1-bbbbb", 1)):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=Pod(
                name=name, job="job", rank=rank, phase=PodPhase.RUNNING, created=50.0)))
        await pilot.pause()
        assert table.wants_usage
        cells = lambda row: [table.get_row_at(row)[table.get_column_index(k)].plain for k in ("cpu", "mem")]  # noqa: E731
        assert cells(0) == ["-", "-"]
        shown = asyncio.Queue()

        async def read():
            return readings.pop(0)

        def show(usage):
            table.show_usage(usage)
            shown.put_nowait(usage)

        worker = app.run_worker(sample(read, show, every=0.01, wanted=lambda: table.wants_usage, absent_every=60))
        await asyncio.wait_for(shown.get(), 5)
        assert cells(0) == ["250m", "1.2Gi"]
        assert cells(1) == ["-", "-"]  # not sampled yet
        await asyncio.wait_for(shown.get(), 5)  # no metrics-server: unknown again, not zero
        assert cells(0) == ["-", "-"]
        worker.cancel()


async def test_a_narrow_table_drops_whole_columns_and_keeps_the_ones_that_matter():
    from tui.widgets.pods_table import columns_for

    assert "cpu" in columns_for(120) and "age" in columns_for(120)
    assert columns_for(66) == ("pod", "rank", "attempt", "phase", "reason", "step", "loss", "cpu", "mem")
    assert columns_for(60) == ("pod", "rank", "attempt", "phase", "reason", "step", "cpu", "mem")
    # the pods panel of the one-screen grid at 120x36, and the pods tab beside the checklist at 80x24
    assert columns_for(47) == ("pod", "rank", "attempt", "phase", "step", "cpu", "mem")
    assert columns_for(30) == ("pod", "rank", "attempt", "phase", "step")  # too narrow: never cut short
    app = TableApp()
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one(PodsTable)
        table.reset("job")
        table.apply(PodEvent(type=PodEventType.ADDED, pod=pod("job-node-0-0-aaaaa", 0)))
        await pilot.pause()
        assert table.shown_columns == columns_for(table.size.width)
        assert "age" not in table.shown_columns
        assert table.virtual_size.width <= table.size.width  # nothing scrolls off to the right
        await pilot.resize_terminal(38, 10)
        await pilot.pause()
        assert "mem" not in table.shown_columns
        table.show_usage({})  # a reading for columns the table dropped changes nothing
        await pilot.resize_terminal(140, 10)
        await pilot.pause()
        assert "age" in table.shown_columns and "cpu" in table.shown_columns
        assert table.selected_pod == "job-node-0-0-aaaaa"


async def test_age_is_since_the_pod_was_created_as_kubectl_shows_it_finished_or_deleted():
    now = 2000.0

    class AgedApp(App):
        def compose(self) -> ComposeResult:
            yield PodsTable(clock=lambda: now, redraw_seconds=0)

    app = AgedApp()
    async with app.run_test(size=(120, 10)) as pilot:
        table = app.query_one(PodsTable)
        table.reset("job")
        # created 13 min ago, ran for a second: kubectl says 13m, not 1s
        done = Pod(name="job-node-0-0-aaaaa", job="job", rank=0, phase=PodPhase.SUCCEEDED,
                   created=now - 780, started=now - 779, finished=now - 778)
        killed = Pod(name="job-node-0-1-bbbbb", job="job", rank=1, phase=PodPhase.RUNNING, created=now - 125)
        for p in (done, killed):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=p))
        table.apply(PodEvent(type=PodEventType.DELETED, pod=killed))
        await pilot.pause()
        age = table.get_column_index("age")
        assert table.get_row(done.name)[age].plain == "13m"
        assert table.get_row(killed.name)[age].plain == "2m5s"  # a history row ages on too


async def test_a_stepping_job_redraws_the_rows_at_a_readers_rate_and_repaints_only_changed_cells():
    """Following a job wrote ~100 kB/s to the terminal, most of it the pods table repainted whole
    at every step (bench/tui_bytes.py): rows are drawn at once after a quiet spell, then at most
    once per ROWS_SECONDS with the newest values, and a changed cell is repainted alone."""
    from textual.geometry import Region

    from tui.widgets.pods_table import ROWS_SECONDS

    drawn = asyncio.Event()
    repainted: list[tuple[Region, ...]] = []

    class Counted(PodsTable):
        draws = 0

        def _show(self) -> None:
            Counted.draws += 1
            super()._show()
            drawn.set()

        def refresh(self, *regions, **kwargs):
            if not getattr(self, "_cells_only", True) and not kwargs:
                repainted.append(regions)
            return super().refresh(*regions, **kwargs)

    class CountedApp(App):
        def compose(self) -> ComposeResult:
            yield Counted(clock=lambda: 100.0)

    app = CountedApp()
    async with app.run_test(size=(120, 10)) as pilot:
        table = app.query_one(Counted)
        table.reset("job")
        first = Pod(name="job-node-0-0-aaaaa", job="job", rank=0, phase=PodPhase.RUNNING, created=50.0)
        table.apply(PodEvent(type=PodEventType.ADDED, pod=first))
        await asyncio.sleep(ROWS_SECONDS)  # a quiet spell (what the test is about: no event to wait on)
        await pilot.pause()
        Counted.draws, repainted[:] = 0, []
        drawn.clear()
        for step in range(1, 51):  # fifty steps in a burst
            table.apply(PodEvent(type=PodEventType.MODIFIED, pod=first.model_copy(
                update={"last_step": step, "last_loss": 1 / step})))
        assert Counted.draws == 1 and table.get_row(first.name)[table.get_column_index("step")].plain == "1"
        drawn.clear()
        await asyncio.wait_for(drawn.wait(), 5)  # the cool-down's end: the newest step
        assert Counted.draws == 2 and table.get_row(first.name)[table.get_column_index("step")].plain == "50"
        # cells (one row high), never the whole table
        assert repainted and all(regions and all(r.height == 1 for r in regions) for regions in repainted), repainted


async def test_a_group_larger_than_the_panel_shows_is_summarised_and_the_rows_name_the_ranks_read():
    """A row per pod while they fit (the lesson's two always); more pods than the panel's rows
    (or than logs are read for, 16) are summarised, and the ranks with a row are told."""
    shown: list[tuple[int, ...]] = []

    class Told(App):
        def compose(self) -> ComposeResult:
            yield PodsTable(clock=lambda: 100.0, redraw_seconds=0)

        def on_pods_table_ranks_shown(self, event: PodsTable.RanksShown) -> None:
            shown.append(event.ranks)

    app = Told()
    async with app.run_test(size=(120, 10)) as pilot:
        table = app.query_one(PodsTable)
        table.reset("job")
        for rank in range(12):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=pod(f"job-node-0-{rank}-aaaaa", rank)))
        await pilot.pause()
        assert table.group is not None and table.group.size == 12 and table.row_count == 1
        assert shown[-1] == (0,)
        await pilot.resize_terminal(120, 30)  # tall enough: a row each, every rank's log read
        await pilot.pause()
        assert table.group is None and table.row_count == 12 and shown[-1] == tuple(range(12))
        for rank in range(12, 20):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=pod(f"job-node-0-{rank}-aaaaa", rank)))
        await pilot.pause()
        assert table.group is not None and table.group.size == 20  # more logs than are read at once


async def test_each_pod_names_its_node_as_kubectl_get_pods_o_wide_does():
    """On a cluster of several nodes, where each rank runs (kind's `<cluster>-worker2` as
    `worker2`; "-" for a pod not scheduled yet); the first column to go when the table is narrow."""
    from tui.widgets.pods_table import columns_for

    assert "node" in columns_for(120) and "node" not in columns_for(66)
    app = TableApp()
    async with app.run_test(size=(120, 10)) as pilot:
        table = app.query_one(PodsTable)
        table.reset("job")
        placed = pod("job-node-0-0-aaaaa", 0).model_copy(update={"node": "kfcockpit-worker2"})
        waiting = pod("job-node-0-1-bbbbb", 1).model_copy(update={"node": "", "phase": PodPhase.PENDING})
        for p in (placed, waiting):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=p))
        await pilot.pause()
        node = table.get_column_index("node")
        assert table.get_row(placed.name)[node].plain == "worker2"
        assert table.get_row(waiting.name)[node].plain == "-"


async def test_the_whole_pod_name_where_the_row_has_room_its_distinct_end_where_not():
    """The panel showed `0-fbsk8` though its row had room for `lesson-ddp-node-0-0-fbsk8`, the
    name kubectl takes."""
    name = "lesson-ddp-node-0-0-fbsk8"
    for width, shown in ((100, name), (47, "0-fbsk8")):  # zoomed at 100 columns; the tab at 80x24
        app = TableApp()
        async with app.run_test(size=(width, 10)) as pilot:
            table = app.query_one(PodsTable)
            table.reset("lesson-ddp")
            table.apply(PodEvent(type=PodEventType.ADDED, pod=Pod(name=name, job="lesson-ddp", rank=0,
                                                                  phase=PodPhase.RUNNING, created=50.0)))
            await pilot.pause()
            assert table.get_row_at(0)[0].plain == shown, (width, table.pod_cells)
