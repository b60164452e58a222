"""The followed logs of several pods merged in time order (backend/kube/log_merge.py): a line
goes once every pod still followed has printed past it, or once it has waited long enough."""

from __future__ import annotations

from backend.models import LogLine
from backend.kube.log_merge import TimeMerge


def lines(pod: str, rank: int, *steps: int) -> list[LogLine]:
    return [LogLine.parsed(pod, rank, 100.0 + step, f"step={step} loss=0.5 rank={rank} world=2") for step in steps]


def test_a_rank_that_arrives_late_is_merged_in_order_with_the_other():
    now = [0.0]
    merge = TimeMerge(hold=0.5, clock=lambda: now[0])
    merge.add(lines("p0", 0, 30, 31, 32, 33, 34, 35))  # rank 0's read came first
    assert merge.ready(["p0", "p1"]) == []  # rank 1 has printed nothing yet: it may be behind
    merge.add(lines("p1", 1, 30, 31, 32))
    ready = merge.ready(["p0", "p1"])
    assert [(line.step, line.rank) for line in ready] == [(30, 0), (30, 1), (31, 0), (31, 1), (32, 0), (32, 1)]
    assert merge.wait() == 0.5
    now[0] = 0.4
    assert merge.ready(["p0", "p1"]) == []
    now[0] = 0.5  # rank 1 says nothing more: rank 0's lines do not wait for it any longer
    assert [line.step for line in merge.ready(["p0", "p1"])] == [33, 34, 35]
    assert merge.wait() is None
    merge.add(lines("p1", 1, 33) + lines("p0", 0, 36))
    assert [line.step for line in merge.ready(["p1"])] == [33]  # p0 ended: only p1 could bring older lines
    assert [line.step for line in merge.flush()] == [36]


def test_a_line_that_waited_lets_the_older_ones_go_first_and_never_spins():
    now = [0.0]
    merge = TimeMerge(hold=0.5, clock=lambda: now[0])
    merge.add(lines("p0", 0, 5))
    now[0] = 0.3
    merge.add(lines("p1", 1, 4))  # older, but arrived later
    now[0] = 0.5
    assert [line.step for line in merge.ready(["p0", "p1", "p2"])] == [4, 5]  # p2 silent: step 5 waited enough
    assert merge.wait() is None
