"""The pods table on its own: rows come from watch events, workers first, a RayJob's driver last."""

from __future__ import annotations

from textual.app import App, ComposeResult

from backend.models import DRIVER_RANK, Pod, PodEvent, PodEventType, PodPhase
from tui.widgets.pods_table import PodsTable


class TableApp(App):
    def compose(self) -> ComposeResult:
        yield PodsTable(clock=lambda: 100.0)


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
