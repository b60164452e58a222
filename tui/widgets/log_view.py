"""The logs panel: every worker of the followed job merged, each rank its own colour, a text and
pod/rank filter, and a follow mode that pauses when the learner scrolls up ("N new lines").
Separator lines mark a worker's failure and a new group's start; a line wider than the panel
wraps (at a space between logfmt fields) rather than being cut: `bytes=9150|06` read as 9150 is
a wrong number, not a shorter one. A width change re-wraps from the buffer.

Lines arrive from the screen's stream worker through `ingest` (a method call down). They are kept
in a bounded LogBuffer and written to the Log widget in one `write_lines` per flush, at most one
flush every `FLUSH_SECONDS` (sooner only when a whole buffer of lines waits): one write per worker
line would cap at a few thousand lines a second and freeze the UI; batched, the cost per line is a
list append. Each flush scrolls, and a scroll repaints the whole panel (in the process and on the
terminal's wire), so the flush rate is what following a job costs, whatever the line rate
(bench/tui_bytes.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.geometry import Size
from textual.reactive import Reactive, reactive
from textual.widgets import Input, Log, Select

from tui.model.format import rank_colour
from tui.model.log_buffer import MARK_LEAD, LogBuffer, LogFilter, rank_of_display, wrap_line

if TYPE_CHECKING:
    from backend.models import LogLine

# 4 repaints a second, a line waits 0.25 s at most. A flush scrolls, and a scroll repaints the
# whole panel: following the lesson's job at 100 lines/s, each flush is ~5 kB on the wire and the
# logs most of what the cockpit writes (bench/tui_bytes.py: 5 a second came to 37 kB/s of the 40).
FLUSH_SECONDS = 0.25
DEFAULT_CAPACITY = 20_000


class RankHighlighter(Highlighter):
    """Colours a line by the rank in its prefix; runs only for lines on screen."""

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if plain.startswith(MARK_LEAD):  # a kill or a restart: unmissable, and not by colour alone
            text.stylize("bold red" if "✘" in plain else "bold green")
            return
        rank = rank_of_display(plain)
        if rank is None:
            return
        colour = rank_colour(rank)
        bar = plain.find(" | ")
        if bar < 0:  # "r0 + pod": a pod joined the stream
            text.stylize(f"bold {colour}")
            return
        text.stylize(f"bold {colour}", 0, bar + 2)
        if "event=resumed" in plain:  # the moment the lesson is about
            text.stylize("bold black on green", bar + 3)
        elif "resumed" in plain or "checkpoint" in plain:
            text.stylize("bold", bar + 3)
        elif "Error" in plain or "error" in plain or "Traceback" in plain:
            text.stylize("bold red", bar + 3)


class FollowLog(Log):
    """A Log that says when the learner scrolls away from the end, or back to it."""

    class AtEnd(Message):
        def __init__(self, at_end: bool) -> None:
            super().__init__()
            self.at_end = at_end

    def __init__(self, max_lines: int, **kwargs) -> None:
        super().__init__(highlight=True, max_lines=max_lines, **kwargs)
        self.highlighter = RankHighlighter()
        self._at_end = True

    # Log sets virtual_size on every write and Widget declares it a layout reactive, so each flush
    # laid out the whole screen: the biggest cost of following a job (a third of a core at 10
    # lines/s). This box's size never depends on its lines, so a new virtual size needs only the
    # scrollbars brought up to date; a scrollbar appearing or going still lays out (its own
    # reactive asks for it).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        self._scroll_update(size)

    def _update_size(self, updates: int, lines: list[str]) -> None:
        # Log measures every written line's width in a thread worker of its own per write
        # (expandtabs, a regex and cell_len per line: as much CPU per line as all the rest of its
        # way, holding the GIL the keys wait for). A printable ASCII line's width is its length;
        # only the others need Log's measure. Same width, on the loop, in a fraction of the time.
        if lines:
            measure = self._process_line
            widest = max(len(line) if line.isascii() and line.isprintable() else cell_len(measure(line))
                         for line in lines)
            self._update_maximum_width(updates, widest)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        at_end = new_value >= self.max_scroll_y
        if at_end != self._at_end:
            self._at_end = at_end
            self.post_message(self.AtEnd(at_end))


class LogView(Vertical):
    """Filter bar above a FollowLog; the border subtitle says follow state and new lines."""

    DEFAULT_CSS = """
    #log-filter-bar { height: 1; }
    #log-filter { width: 1fr; }
    #log-source { width: 22; margin-left: 1; }
    #log-lines { height: 1fr; overflow: auto scroll; scrollbar-size: 1 1; }
    """
    BORDER_TITLE = "logs"
    BINDINGS = [
        Binding("escape", "focus_lines", "Back to the lines", show=False),
        Binding("end", "follow_end", "Follow", show=False),
    ]

    follow: reactive[bool] = reactive(True)
    unseen: reactive[int] = reactive(0)  # lines that arrived while not following

    class Flushed(Message):
        """Lines reached the screen (one per flush, not per line); a newer one replaces a pending one."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LogView.Flushed)

    class FilterChanged(Message):
        def __init__(self, keep: LogFilter) -> None:
            super().__init__()
            self.keep = keep

    def __init__(self, capacity: int = DEFAULT_CAPACITY, **kwargs) -> None:
        super().__init__(**kwargs)
        self.buffer = LogBuffer(capacity)
        self.keep = LogFilter()
        self.job: str | None = None
        self.shown = 0  # lines handed to the Log widget (the bench's "lines shown")
        self._pending: list[str] = []
        self._flush_timer = None
        self._known_pods: dict[str, int] = {}
        self._sources = 0  # the buffer's (pod, rank) pairs when the choices were last made
        self._wrap_width = 0  # the width lines were wrapped for (0: not laid out yet)

    def compose(self) -> ComposeResult:
        with Horizontal(id="log-filter-bar"):
            yield Input(placeholder="/ filter text", id="log-filter", compact=True)
            yield Select[str]([], prompt="all workers", id="log-source", compact=True)
        yield FollowLog(max_lines=self.buffer.capacity, id="log-lines")

    def on_mount(self) -> None:
        self._show_state()

    @property
    def log_widget(self) -> FollowLog:
        return self.query_one(FollowLog)

    @property
    def flush_pending(self) -> bool:
        """Lines taken that the Log widget has not been given yet (they go at the next flush)."""
        return bool(self._pending)

    # ------------------------------------------------------------------ method calls down

    def reset(self, job: str | None) -> None:
        """Start over for another job (or the same job's stream reopened from its start)."""
        self.job = job
        self.buffer.clear()
        self._pending.clear()
        self._known_pods = {}
        self.log_widget.clear()
        self.border_title = Content(f"logs · {job}" if job else "logs")  # the cluster's name: plain
        self.unseen = 0
        self._refresh_sources()

    def ingest(self, batch: list["LogLine"]) -> None:
        """Take a batch from the stream; drawn at the next flush."""
        shown = self.buffer.add(batch, self.keep)
        self._pend(shown)
        if self.buffer.source_count != self._sources:
            self._refresh_sources()

    def mark(self, text: str) -> None:
        """A separator line (a worker failed, a new group started), in order with the lines."""
        self._pend([self.buffer.add_mark(text)])

    def _pend(self, shown: list[str]) -> None:
        if shown:
            capacity = self.buffer.capacity
            if len(self._pending) + len(shown) > capacity:
                # A whole buffer waits (100k lines a second fill 20k in one FLUSH_SECONDS): what
                # waits is written now, rather than its oldest dropped unseen to make room. Only a
                # batch larger than the buffer loses lines: one write would push them out at once.
                if self._flush_timer is not None:
                    self._flush_timer.stop()
                self._flush()
                if len(shown) > capacity:
                    del shown[: len(shown) - capacity]
            self._pending.extend(shown)
            if self._flush_timer is None:
                self._flush_timer = self.set_timer(FLUSH_SECONDS, self._flush)

    def set_filter(self, keep: LogFilter, from_text_box: bool = False) -> None:
        if keep == self.keep:
            return
        self.keep = keep
        self._rewrite()
        self.unseen = 0
        self.follow = True
        # Never write back into the box the learner is typing in: the box runs ahead of the
        # Changed messages, and writing an older value back starts a loop of Changed messages.
        self._sync_filter_inputs(text=not from_text_box)
        self._show_state()
        self.post_message(self.FilterChanged(keep))

    def _rewrite(self) -> None:
        """Everything that passes the filter again, wrapped for the current width."""
        self._pending.clear()
        log = self.log_widget
        log.clear()
        lines = self._wrapped(self.buffer.matching(self.keep))
        log.write_lines(lines, scroll_end=True)
        self.shown += len(lines)

    def _wrapped(self, lines: list[str]) -> list[str]:
        width = self._wrap_width
        if width <= 0 or all(len(line) <= width for line in lines):
            return lines
        rows: list[str] = []
        for line in lines:
            if len(line) <= width:
                rows.append(line)
            else:
                rows.extend(wrap_line(line, width))
        return rows

    def on_resize(self) -> None:
        width = self.log_widget.scrollable_content_region.width
        if width > 0 and width != self._wrap_width:
            self._wrap_width = width
            self._rewrite()

    def show_pod(self, pod: str | None) -> None:
        self.set_filter(LogFilter(text=self.keep.text, pod=pod))

    def focus_filter(self) -> None:
        # At once, not after the queue: the keys typed right after `/` are the filter's.
        self.screen.set_focus(self.query_one("#log-filter", Input))

    def toggle_follow(self) -> None:
        if self.follow:
            self.follow = False
        else:
            self.follow = True
            self.log_widget.scroll_end(animate=False, immediate=True)

    def action_focus_lines(self) -> None:
        self.log_widget.focus()

    def action_follow_end(self) -> None:
        self.follow = True
        self.log_widget.scroll_end(animate=False, immediate=True)

    # ------------------------------------------------------------------ internals

    def _flush(self) -> None:
        self._flush_timer = None
        lines, self._pending = self._pending, []
        if not lines:
            return
        log = self.log_widget
        lines = self._wrapped(lines)
        overflow = len(log.lines) + len(lines) - self.buffer.capacity
        log.write_lines(lines, scroll_end=self.follow)
        self.shown += len(lines)
        self.post_message(self.Flushed())
        if not self.follow:
            self.unseen += len(lines)
            if overflow > 0:  # lines left the top: keep the text the learner reads in place
                log.scroll_to(y=max(0, log.scroll_y - overflow), animate=False, immediate=True)

    def _refresh_sources(self) -> None:
        pods = self.buffer.pods
        self._known_pods = pods
        self._sources = self.buffer.source_count
        ranks = sorted(self.buffer.ranks)
        options = [(Content(f"rank {r}"), f"rank:{r}") for r in ranks]
        options += [(Content(f"pod {p}"), f"pod:{p}") for p in pods]
        select = self.query_one("#log-source", Select)
        current = select.value
        select.set_options(options)
        if current != Select.NULL and any(value == current for _, value in options):
            select.value = current

    def _sync_filter_inputs(self, text: bool = True) -> None:
        field = self.query_one("#log-filter", Input)
        if text and field.value != self.keep.text:
            field.value = self.keep.text
        select = self.query_one("#log-source", Select)
        wanted = (f"pod:{self.keep.pod}" if self.keep.pod is not None
                  else f"rank:{self.keep.rank}" if self.keep.rank is not None else Select.NULL)
        if select.value != wanted:
            if wanted is Select.NULL:
                select.clear()
            elif self.keep.pod is not None and self.keep.pod not in self._known_pods:
                pass  # a pod with no lines yet: the filter holds, the list catches up later
            else:
                select.value = wanted

    def _show_state(self) -> None:
        if self.follow:
            state = "following · f pause"
        elif self.unseen:
            state = f"paused · {self.unseen:,} new lines · f follow"
        else:
            state = "paused · f follow"
        if self.keep.active:
            state = f"filter: {self.keep.describe()} · {state}"
        self.border_subtitle = Content(state)  # says what the learner typed in the filter: plain

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.unseen = 0
        self._show_state()

    def watch_unseen(self, unseen: int) -> None:
        self._show_state()

    @on(FollowLog.AtEnd)
    def _scrolled(self, event: FollowLog.AtEnd) -> None:
        event.stop()
        self.follow = event.at_end

    @on(Input.Changed, "#log-filter")
    def _text_changed(self, event: Input.Changed) -> None:
        event.stop()
        value = event.input.value  # the box's latest, not this (possibly older) message's
        self.set_filter(LogFilter(text=value, pod=self.keep.pod, rank=self.keep.rank), from_text_box=True)

    @on(Input.Submitted, "#log-filter")
    def _text_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.log_widget.focus()

    @on(Select.Changed, "#log-source")
    def _source_changed(self, event: Select.Changed) -> None:
        event.stop()
        value = self.query_one("#log-source", Select).value  # the latest, not the event's
        pod = rank = None
        if isinstance(value, str) and value.startswith("pod:"):
            pod = value[4:]
        elif isinstance(value, str) and value.startswith("rank:"):
            rank = int(value[5:])
        self.set_filter(LogFilter(text=self.keep.text, pod=pod, rank=rank))
