"""The log pane and the pods table on their own (no cluster): typing fast into the filter, long
lines wrapped rather than cut, separators shown by every filter, a killed attempt kept as history."""

from __future__ import annotations

from textual import events
from textual.app import App, ComposeResult
from textual.widgets import Input

from backend.models import LogLine, Pod, PodEvent, PodEventType, PodPhase
from tui.model.log_buffer import LogFilter, wrap_line
from tui.widgets.log_view import LogView
from tui.widgets.pods_table import PodsTable


def lines(n: int) -> list[LogLine]:
    out = []
    for i in range(n):
        out.append(LogLine.parsed(f"job-node-0-{i % 2}-abcde", i % 2, 100.0 + i,
                                  f"step={i} loss=0.{i:06d} rank={i % 2} world=2"))
        if i % 50 == 0:
            out.append(LogLine(f"job-node-0-{i % 2}-abcde", i % 2, 100.0 + i,
                               f"event=checkpoint_saved step={i} reason=periodic file=ckpt-step-{i:06d}.pt "
                               f"bytes=915006 seconds=0.012345 rank={i % 2}"))
    return out


class LogApp(App):
    def __init__(self) -> None:
        super().__init__()
        self.filter_changes: list[LogFilter] = []

    def compose(self) -> ComposeResult:
        yield LogView(id="log-view")

    def on_log_view_filter_changed(self, event: LogView.FilterChanged) -> None:
        self.filter_changes.append(event.keep)


async def test_typing_fast_into_the_filter_ends_on_what_was_typed_and_settles():
    app = LogApp()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(LogView)
        view.ingest(lines(5000))
        await pilot.pause()
        view.focus_filter()
        box = view.query_one("#log-filter", Input)
        assert app.focused is box
        # Every key queued before the first is handled: the box runs ahead of its Changed messages.
        for ch in "loss=0.0001":
            app.post_message(events.Key(ch, ch))
        await pilot.press(*"2")  # and the same through the pilot, without pauses
        await pilot.pause()
        assert box.value == "loss=0.00012"
        assert view.keep.text == "loss=0.00012"
        settled = len(app.filter_changes)
        for _ in range(5):  # nothing keeps going once the keys are handled
            await pilot.pause(0.05)
        assert len(app.filter_changes) == settled <= len("loss=0.00012")
        assert box.value == "loss=0.00012"
        shown = list(view.log_widget.lines)
        assert shown and all("loss=0.00012" in line for line in shown)


async def test_a_long_line_wraps_instead_of_being_cut_and_separators_pass_every_filter():
    app = LogApp()
    async with app.run_test(size=(60, 20)) as pilot:
        view = app.query_one(LogView)
        view.ingest(lines(3))
        view.mark("✘ pod 0-abcde (rank 0, attempt 0) Killed, exit 137")
        await flushed(app, pilot)
        width = view.log_widget.scrollable_content_region.width
        rows = list(view.log_widget.lines)
        assert all(len(row) <= width for row in rows)
        joined = " ".join(row.replace("    ↪ ", "") for row in rows)
        assert "bytes=915006" in joined  # the number whole, on one row
        assert any(row.startswith("────") and "Killed" in row for row in rows)
        view.set_filter(LogFilter(text="step=2 "))
        await pilot.pause()
        assert any("Killed" in row for row in view.log_widget.lines)  # the separator stays


async def test_following_lines_scrolls_the_log_without_laying_out_the_screen():
    """A flush grows the Log's virtual size; that must not reflow every widget on the screen (it was
    the biggest cost of following a job), yet the log still scrolls to its newest line."""
    app = LogApp()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        log = view.log_widget
        view.ingest(lines(100))
        await flushed(app, pilot)
        layouts = []
        refresh_layout = app.screen._refresh_layout
        app.screen._refresh_layout = lambda *a, **k: (layouts.append(1), refresh_layout(*a, **k))[1]
        for first in range(100, 400, 100):
            before = log.max_scroll_y
            view.ingest(lines(first + 100)[first + first // 50:])  # the next 100 step lines
            await flushed(app, pilot)
            assert log.max_scroll_y > before and log.scroll_y == log.max_scroll_y  # followed to the end
        assert layouts == []
        assert log.vertical_scrollbar.window_virtual_size == log.virtual_size.height == len(log.lines)


async def test_the_log_is_as_wide_as_its_widest_line_in_cells_not_characters():
    """The Log's width is measured on the loop (not a thread per write): a printable ASCII line by
    its length, any other by its cells, as Log itself measures them."""
    app = LogApp()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        wide = "步" * 30  # 30 characters, 60 cells: wider than the panel though short enough not to wrap
        view.ingest([LogLine("job-node-0-0-abcde", 0, 1.0, "step=1 loss=0.5"),
                     LogLine("job-node-0-0-abcde", 0, 2.0, wide)])
        await flushed(app, pilot)
        assert view.log_widget.virtual_size.width == len("r0 | ") + 60


async def test_a_whole_buffer_of_waiting_lines_is_written_at_once_not_dropped_at_the_timer():
    class SmallLogApp(App):
        def compose(self) -> ComposeResult:
            yield LogView(capacity=100, id="log-view")

    app = SmallLogApp()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        batch = [line for line in lines(300) if line.step is not None]
        view.ingest(batch[:60])  # the first line of each pod announces it: 62 lines wait
        assert view.shown == 0 and view._flush_timer is not None
        view.ingest(batch[60:120])  # 122 would wait, more than a buffer: the 62 are written now
        assert view.shown == 62 and len(view._pending) == 60 and view._flush_timer is not None
        await flushed(app, pilot)
        assert view.shown == 122  # not one line dropped
        assert view.log_widget.lines[-1].endswith("step=119 loss=0.000119 rank=1 world=2")
        view.ingest(batch[120:270])  # one batch larger than the buffer: only its newest 100 fit
        await flushed(app, pilot)
        assert view.shown == 222 and len(view.log_widget.lines) == 100
        assert view.log_widget.lines[-1].endswith("step=269 loss=0.000269 rank=1 world=2")


async def flushed(app, pilot) -> None:
    """Until the view's pending lines reached the Log (its flush runs on a timer)."""
    view = app.query_one(LogView)
    while view._flush_timer is not None or view._pending:
        await pilot.pause(0.05)
    await pilot.pause()


def test_wrap_line_breaks_between_fields():
    rows = wrap_line("r0 | event=checkpoint_saved step=5 bytes=915006 seconds=0.01", 30)
    assert rows == ["r0 | event=checkpoint_saved", "    ↪ step=5 bytes=915006", "    ↪ seconds=0.01"]
    assert wrap_line("short", 30) == ["short"]


def pod(name: str, rank: int, attempt: int, phase: PodPhase = PodPhase.RUNNING, **kw) -> Pod:
    return Pod(name=name, job="job", rank=rank, restart_attempt=attempt, phase=phase, created=50.0, **kw)


class TableApp(App):
    def compose(self) -> ComposeResult:
        yield PodsTable(clock=lambda: 100.0, redraw_seconds=0)  # every change drawn at once


async def test_a_killed_attempt_stays_listed_failed_and_dimmed_below_the_new_group():
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(PodsTable)
        table.reset("job")
        for p in (pod("job-node-0-0-aaaaa", 0, 0), pod("job-node-0-1-bbbbb", 1, 0)):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=p))
        table.apply(PodEvent(type=PodEventType.MODIFIED, pod=pod(
            "job-node-0-1-bbbbb", 1, 0, PodPhase.FAILED, reason="Killed", exit_code=137)))
        # JobSet recreates the group: the old pods are DELETED (the survivor still says Running)
        table.apply(PodEvent(type=PodEventType.DELETED, pod=pod("job-node-0-0-aaaaa", 0, 0)))
        table.apply(PodEvent(type=PodEventType.DELETED, pod=pod(
            "job-node-0-1-bbbbb", 1, 0, PodPhase.FAILED, reason="Killed", exit_code=137)))
        for p in (pod("job-node-0-0-ccccc", 0, 1), pod("job-node-0-1-ddddd", 1, 1)):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=p))
        await pilot.pause()
        rows = [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [r[0] for r in rows] == ["0-ccccc", "1-ddddd", "0-aaaaa", "1-bbbbb"]
        phase, reason = table.get_column_index("phase"), table.get_column_index("reason")
        assert rows[2][phase] == "Failed" and rows[2][reason] == "Deleted"
        assert rows[3][phase] == "Failed" and rows[3][reason] == "Killed 137"
        assert "dim" in str(table.get_row_at(3)[0].style)
        assert table.is_history("job-node-0-1-bbbbb") and not table.is_history("job-node-0-1-ddddd")
        table.reset("job", keep_history=True)  # the watch reopened: the live rows come again
        assert sorted(table.pods) == ["job-node-0-0-aaaaa", "job-node-0-1-bbbbb"]
