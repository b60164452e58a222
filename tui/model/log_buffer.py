"""The log model behind the log view: a bounded buffer of display lines, one per worker line,
plus which pod printed each, so a filter can be re-applied without asking the cluster again.

Kept apart from the widget so the memory bound and the filter are plain code. Display lines are
ASCII-prefixed `str`s shared with the Log widget (no copies): one string per retained line.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Iterator

from tui.model.format import DRIVER_LABEL

if TYPE_CHECKING:
    from backend.models import LogLine

# Control characters would move the cursor in a terminal; newlines would split one line in two.
_UNPRINTABLE = {c: "?" for c in range(32) if c != 9}


def printable(text: str) -> str:
    """A worker's line, its control characters shown as `?`."""
    return text if text.isprintable() else text.translate(_UNPRINTABLE)


MARK_LEAD = "────"


def mark_line(text: str) -> str:
    return f"{MARK_LEAD} {text} {MARK_LEAD}"


def wrap_line(line: str, width: int, indent: str = "    ↪ ") -> list[str]:
    """A line cut into rows of at most `width` characters, at spaces where it can (logfmt fields
    stay whole), continuation rows indented: a number is never cut off at the panel's edge."""
    if width <= len(indent) + 8 or len(line) <= width:
        return [line]
    rows: list[str] = []
    rest, avail = line, width
    while len(rest) > avail:
        cut = rest.rfind(" ", 0, avail + 1)
        if cut <= avail // 3:  # no space worth breaking at: cut the word
            cut = avail
        rows.append(rest[:cut] if not rows else indent + rest[:cut])
        rest = rest[cut:].lstrip(" ")
        avail = width - len(indent)
    if rest:
        rows.append(rest if not rows else indent + rest)
    return rows


def _tag(rank: int) -> str:
    return f"r{rank}" if rank >= 0 else DRIVER_LABEL


def rank_prefix(rank: int) -> str:
    return f"{_tag(rank)} | "


def new_pod_line(pod: str, rank: int) -> str:
    """The line shown when a pod first speaks (stern's '+ pod'): a replacement group is visible."""
    return f"{_tag(rank)} + {pod}"


def rank_of_display(line: str) -> int | None:
    """The rank a display line belongs to (its prefix), without a regex: this runs per render."""
    if not line.startswith("r"):
        return None
    end = line.find(" ", 1)
    digits = line[1:end] if end > 1 else ""
    return int(digits) if digits.isdigit() else None


@dataclass(frozen=True)
class LogFilter:
    """What the learner asked to see: lines containing `text` (case-insensitive), from one pod or one rank."""

    text: str = ""
    pod: str | None = None
    rank: int | None = None
    _needle: str = field(init=False, repr=False, compare=False)  # text lower-cased once, not per line

    def __post_init__(self) -> None:
        object.__setattr__(self, "_needle", self.text.lower())

    @property
    def active(self) -> bool:
        return bool(self.text) or self.pod is not None or self.rank is not None

    def accepts(self, display: str, pod: str, rank: int) -> bool:
        if self.pod is not None and pod != self.pod:
            return False
        if self.rank is not None and rank != self.rank:
            return False
        return not self._needle or self._needle in display.lower()

    def describe(self) -> str:
        parts = []
        if self.pod is not None:
            parts.append(f"pod {self.pod}")
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.text:
            parts.append(f"text {self.text!r}")
        return ", ".join(parts) or "none"


class LogBuffer:
    """The last `capacity` lines of a job, merged across workers."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lines: deque[str] = deque(maxlen=capacity)
        # (pod, rank) → (one shared string for the pod, not one per line; the rank; its lines'
        # prefix): made once per rank, not per line. A pod runs one rank per GPU, each line
        # says its own (`rank=`), so a pod may have several.
        self._known: dict[tuple[str, int], tuple[str, int, str]] = {}
        self._entries: deque[tuple[str, int, str] | None] = deque(maxlen=capacity)  # None: a mark
        self._ranks: dict[str, int] = {}  # pod name → its first rank seen
        self.ranks: dict[int, None] = {}  # every rank seen, in order of first line
        self.added = 0  # worker lines ever added

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def pods(self) -> dict[str, int]:
        """Every pod seen so far and its rank, in order of first line."""
        return dict(self._ranks)

    @property
    def source_count(self) -> int:
        """The (pod, rank) pairs seen, without a copy (asked after every batch)."""
        return len(self._known)

    def clear(self) -> None:
        self._lines.clear()
        self._known.clear()
        self._entries.clear()
        self._ranks.clear()
        self.ranks.clear()

    def add(self, batch: Iterable["LogLine"], keep: LogFilter) -> list[str]:
        """Store a batch; return the display lines that pass `keep`, in order."""
        shown: list[str] = []
        add_line, add_entry, show = self._lines.append, self._entries.append, shown.append
        known = self._known
        filtering = keep.active
        added = 0
        for line in batch:
            added += 1
            entry = known.get((line.pod, line.rank))
            if entry is None:  # first line of a rank: remember it once, announce it
                entry = known[(line.pod, line.rank)] = (line.pod, line.rank, rank_prefix(line.rank))
                self.ranks[line.rank] = None
                first = line.pod not in self._ranks
                self._ranks.setdefault(line.pod, line.rank)
                if first:
                    marker = new_pod_line(line.pod, line.rank)
                    add_line(marker)
                    add_entry(entry)
                    if not filtering or keep.accepts(marker, line.pod, line.rank):
                        show(marker)
            pod, rank, prefix = entry
            text = line.text
            if not text.isprintable():
                text = text.translate(_UNPRINTABLE)
            display = prefix + text
            add_line(display)
            add_entry(entry)
            if not filtering or keep.accepts(display, pod, rank):
                show(display)
        self.added += added
        return shown

    def add_mark(self, text: str) -> str:
        """A separator (a kill, a restart) between the lines of two attempts; shown by every filter."""
        display = mark_line(text)
        self._lines.append(display)
        self._entries.append(None)
        return display

    def matching(self, keep: LogFilter) -> list[str]:
        """Every retained line that passes `keep` (used when the filter changes)."""
        if not keep.active:
            return list(self._lines)
        return [d for d, e in zip(self._lines, self._entries)
                if e is None or keep.accepts(d, e[0], e[1])]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines)
