"""The log model: bounded, filterable, one shared string per line, replacement pods announced."""

from __future__ import annotations

from backend.models import LogLine
from tui.model.log_buffer import LogBuffer, LogFilter, rank_of_display


def lines(pod: str, rank: int, n: int, start: int = 0) -> list[LogLine]:
    return [LogLine(pod=pod, rank=rank, time=float(i), text=f"step={i} loss=0.5 rank={rank}", step=i, loss=0.5)
            for i in range(start, start + n)]


def test_a_pods_first_line_is_announced_once_then_lines_carry_the_rank():
    buf = LogBuffer(100)
    shown = buf.add(lines("job-node-0-0-aaaaa", 0, 2), LogFilter())
    assert shown == ["r0 + job-node-0-0-aaaaa", "r0 | step=0 loss=0.5 rank=0", "r0 | step=1 loss=0.5 rank=0"]
    assert buf.add(lines("job-node-0-0-aaaaa", 0, 1, start=2), LogFilter()) == ["r0 | step=2 loss=0.5 rank=0"]
    assert [rank_of_display(s) for s in shown] == [0, 0, 0]


def test_the_buffer_keeps_only_the_newest_lines():
    buf = LogBuffer(50)
    buf.add(lines("p0", 0, 200), LogFilter())
    kept = list(buf)
    assert len(kept) == 50
    assert kept[-1].endswith("step=199 loss=0.5 rank=0")
    assert buf.added == 200


def test_filters_by_text_rank_and_pod_and_can_be_changed_afterwards():
    buf = LogBuffer(1000)
    buf.add(lines("p0", 0, 10) + lines("p1", 1, 10), LogFilter())
    by_rank = buf.matching(LogFilter(rank=1))
    assert by_rank and all(s.startswith("r1 ") for s in by_rank)
    assert buf.matching(LogFilter(pod="p0")) == [s for s in buf if s.startswith("r0 ")]
    assert buf.matching(LogFilter(text="STEP=7")) == ["r0 | step=7 loss=0.5 rank=0", "r1 | step=7 loss=0.5 rank=1"]
    assert buf.matching(LogFilter(text="step=7", rank=1)) == ["r1 | step=7 loss=0.5 rank=1"]
    # lines arriving while a filter is on: stored, but only matching ones are shown
    shown = buf.add(lines("p0", 0, 3, start=100), LogFilter(rank=1))
    assert shown == []
    assert len(buf.matching(LogFilter())) == 2 + 20 + 3


def test_control_characters_cannot_reach_the_terminal():
    buf = LogBuffer(10)
    shown = buf.add([LogLine(pod="p", rank=0, time=0.0, text="a\x1b[2Jb\rc")], LogFilter())
    assert shown[-1] == "r0 | a?[2Jb?c"


def test_pod_names_are_stored_once_however_many_lines():
    buf = LogBuffer(100)
    batch = [LogLine(pod="".join(["p", "0"]), rank=0, time=0.0, text="x") for _ in range(5)]
    buf.add(batch, LogFilter())
    assert len({id(entry[0]) for entry in buf._entries}) == 1
