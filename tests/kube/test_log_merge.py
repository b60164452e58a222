"""The logs of a job's pods merged as a person reads them (backend/kube/log_merge.py): the ranks'
lines of one step side by side, though a runtime stamps a burst of lines with one time; restart
attempts one after the other; followed lines handed on once no followed pod can bring an earlier
one, or once they have waited long enough."""

from __future__ import annotations

from backend.kube.log_merge import GRAIN, LogMerge
from backend.models import LogLine


def steps(pod: str, rank: int, at: float, *numbers: int) -> list[LogLine]:
    """Step lines of one read: one stamp for all of them, as a runtime stamps a burst."""
    return [LogLine.parsed(pod, rank, at, f"step={n} loss=0.5 rank={rank} world=2") for n in numbers]


def shown(lines: list[LogLine]) -> list[str]:
    return [f"r{line.rank} {line.text.split()[0]}" for line in lines]


def test_a_fast_job_read_rank_after_rank_is_merged_step_by_step():
    """A finished job's two pods, each read in one burst: stamped by read, not by step."""
    merge = LogMerge()
    merge.pod("p0", 0, attempt=0)
    merge.pod("p1", 1, attempt=0)
    merge.add([LogLine("p0", 0, 100.0, "event=start rank=0 world=2")] + steps("p0", 0, 100.0, 1, 2, 3)
              + [LogLine("p0", 0, 100.0, "event=done step=3 rank=0")])
    merge.add([LogLine("p1", 1, 100.2, "event=start rank=1 world=2")] + steps("p1", 1, 100.2, 1, 2, 3))
    assert shown(merge.flush()) == ["r0 event=start", "r1 event=start", "r0 step=1", "r1 step=1", "r0 step=2",
                                    "r1 step=2", "r0 step=3", "r1 step=3", "r0 event=done"]


def test_a_restarted_group_comes_after_the_old_one_though_it_restarts_from_an_older_step():
    merge = LogMerge()
    merge.pod("old0", 0, attempt=0)
    merge.pod("new1", 1, attempt=1)
    merge.add(steps("old0", 0, 100.0, 10, 11, 12))
    merge.add([LogLine("new1", 1, 100.3, "event=resumed from_step=5")] + steps("new1", 1, 100.4, 6, 7))
    assert shown(merge.flush()) == ["r0 step=10", "r0 step=11", "r0 step=12", "r1 event=resumed",
                                    "r1 step=6", "r1 step=7"]


def test_followed_lines_go_once_no_followed_pod_can_bring_an_earlier_one():
    now = [0.0]
    merge = LogMerge(hold=0.5, clock=lambda: now[0])
    merge.pod("p0", 0, attempt=0)
    merge.pod("p1", 1, attempt=0)
    merge.add(steps("p0", 0, 100.0, 30, 31, 32, 33, 34, 35))  # rank 0's read came first
    assert merge.ready(["p0", "p1"]) == []  # rank 1 has printed nothing yet: it may be at step 30
    merge.add(steps("p1", 1, 100.01, 30, 31, 32))
    assert shown(merge.ready(["p0", "p1"])) == ["r0 step=30", "r1 step=30", "r0 step=31", "r1 step=31",
                                                "r0 step=32", "r1 step=32"]
    assert merge.ready(["p0", "p1"]) == [] and merge.wait() == 0.5  # rank 1 may still print step 33
    now[0] = 0.5  # it says nothing more: rank 0's lines do not wait for it any longer
    assert shown(merge.ready(["p0", "p1"])) == ["r0 step=33", "r0 step=34", "r0 step=35"]
    assert merge.wait() is None
    merge.add(steps("p1", 1, 100.02, 33) + steps("p1", 1, 100.0 + 2 * GRAIN, 36))
    assert shown(merge.ready(["p1"])) == ["r1 step=33", "r1 step=36"]  # p0 ended: nothing can come before


def test_a_line_that_waited_lets_the_earlier_ones_go_first_and_never_spins():
    now = [0.0]
    merge = LogMerge(hold=0.5, clock=lambda: now[0])
    merge.add(steps("p0", 0, 100.0, 5))
    now[0] = 0.3
    merge.add(steps("p1", 1, 99.0, 4))  # earlier, but arrived later; attempts unknown: by stamp
    now[0] = 0.5
    assert shown(merge.ready(["p0", "p1", "p2"])) == ["r1 step=4", "r0 step=5"]  # p2 silent: step 5 waited
    assert merge.wait() is None
