"""A hung group found from its lines and pods: when silence is a hang, and which rank stopped."""

from __future__ import annotations

import pytest

from backend.hangs import HangRule, HangWatch
from backend.models import LogLine, Pod, PodPhase


def steps(first: int, last: int, at: float, every: float, ranks=(0, 1)) -> list[LogLine]:
    return [LogLine.parsed(f"p{r}", r, at + (s - first) * every, f"step={s} loss=0.5 rank={r} world=2")
            for s in range(first, last + 1) for r in ranks]


def start(at: float, pids=(1, 2)) -> list[LogLine]:
    return [LogLine(f"p{r}", r, at, f"event=start rank={r} world=2 pid={pid}") for r, pid in enumerate(pids)]


def running(watch: HangWatch, attempt: int = 0, phases=(PodPhase.RUNNING, PodPhase.RUNNING)) -> None:
    for rank, phase in enumerate(phases):
        watch.pod(Pod(name=f"p{rank}", job="j", rank=rank, restart_attempt=attempt, created=0.0, phase=phase))


def test_silence_past_the_multiple_of_the_usual_step_is_a_hang_of_every_rank():
    watch = HangWatch(HangRule(multiple=10, floor=1.0))
    running(watch)
    watch.lines(start(0.0) + steps(1, 20, at=1.0, every=0.2))  # step 20 at 4.8 s
    assert watch.usual_step() == pytest.approx(0.2)
    assert watch.check(now=4.8 + 1.9) is None  # 9.5 steps of silence
    hang = watch.check(now=4.8 + 2.5)
    assert hang is not None and hang.step == 20 and hang.silent == pytest.approx(2.5)
    assert hang.limit == pytest.approx(2.0) and hang.stopped == (0, 1) and hang.running == (0, 1)
    assert hang.one_line().startswith("hang: every rank stopped after step 20, silent 2s (usual step 200ms")


def test_the_floor_covers_a_slow_save_between_fast_steps():
    watch = HangWatch(HangRule(multiple=10, floor=30.0))
    running(watch)
    watch.lines(start(0.0) + steps(1, 10, at=1.0, every=0.1))
    assert watch.check(now=1.9 + 20) is None  # 200 steps of silence, but under the floor
    assert watch.check(now=1.9 + 31) is not None


def test_a_rank_behind_the_others_is_the_one_that_stopped():
    watch = HangWatch(HangRule(multiple=5, floor=1.0))
    running(watch)
    watch.lines(start(0.0) + steps(1, 10, at=1.0, every=0.5) + steps(11, 11, at=6.0, every=0.5, ranks=(0,)))
    hang = watch.check(now=20.0)
    assert hang.stopped == (1,) and hang.step == 11
    assert "rank 1 stopped after step 11" in hang.one_line() and "its pod still runs" in hang.one_line()


def test_a_silent_rank_among_ranks_that_wait_is_the_one_that_stopped():
    watch = HangWatch(HangRule(multiple=5, floor=1.0))
    running(watch)
    watch.lines(start(0.0) + steps(1, 10, at=1.0, every=0.5))
    watch.lines([LogLine("p0", 0, 9.0, "event=waiting step=11 seconds=3.5 rank=0 world=2")])
    hang = watch.check(now=12.0)
    assert hang.stopped == (1,) and hang.waiting == (0,)
    assert hang.one_line().endswith("its pod still runs; rank 0 waiting on it")


def test_no_hang_without_a_running_pod_after_the_group_ended_or_before_its_first_step():
    watch = HangWatch(HangRule(multiple=5, floor=1.0))
    running(watch)
    watch.lines(start(0.0))
    assert watch.check(now=100.0) is None  # no step yet: start-up is not a hang
    watch.lines(steps(1, 5, at=1.0, every=0.5))
    running(watch, phases=(PodPhase.FAILED, PodPhase.FAILED))
    assert watch.check(now=100.0) is None  # a failure: the platform sees it
    running(watch, attempt=1)
    watch.lines(start(50.0, pids=(3, 4)))
    assert watch.check(now=100.0) is None  # the new group has not stepped yet
    watch.lines(steps(6, 8, at=51.0, every=0.5) + [LogLine(f"p{r}", r, 52.1, f"event=done step=8 rank={r}")
                                                   for r in (0, 1)])
    assert watch.check(now=100.0) is None  # done


def test_an_older_attempts_pods_do_not_count():
    watch = HangWatch(HangRule(multiple=5, floor=1.0))
    running(watch, attempt=1)
    running(watch, attempt=0, phases=(PodPhase.FAILED, PodPhase.FAILED))  # seen late
    watch.lines(start(0.0) + steps(1, 5, at=1.0, every=0.5))
    assert watch.check(now=50.0) is not None


def test_the_old_groups_lines_read_after_the_new_group_came_are_not_its_steps():
    """A lost node's group is replaced; the old pods' last step lines reach the watch after the
    new pods (the merged log holds lines back a moment). While the new group does its rendezvous
    and checkpoint load, that old step is no hang of it."""
    watch = HangWatch(HangRule(multiple=5, floor=1.0))
    running(watch)
    watch.lines(start(0.0) + steps(1, 10, at=1.0, every=0.1))
    for rank in (0, 1):
        watch.pod(Pod(name=f"q{rank}", job="j", rank=rank, restart_attempt=1, created=0.0, phase=PodPhase.RUNNING))
    watch.lines(steps(11, 12, at=2.0, every=0.1))  # p0, p1: the old group's
    assert watch.check(now=60.0) is None
    watch.lines([LogLine.parsed(f"q{r}", r, 61.0 + s * 0.1, f"step={s} loss=0.5 rank={r} world=2")
                 for s in (9, 10, 11) for r in (0, 1)])  # the new group resumes and then stops
    hang = watch.check(now=80.0)
    assert hang is not None and hang.step == 11


def test_a_rank_whose_step_line_came_later_is_not_waiting_without_a_heartbeat():
    """Ranks print one step at slightly different times: a later step line is no heartbeat, so a
    group that stops without one is every rank stopped, not the first to print."""
    watch = HangWatch(HangRule(multiple=5, floor=1.0))
    running(watch)
    watch.lines(start(0.0) + [line for s in range(1, 11) for line in (
        LogLine.parsed("p0", 0, 1.0 + s * 0.5, f"step={s} loss=0.5 rank=0 world=2"),
        LogLine.parsed("p1", 1, 1.1 + s * 0.5, f"step={s} loss=0.5 rank=1 world=2"))])
    hang = watch.check(now=30.0)
    assert hang.stopped == (0, 1) and hang.waiting == ()


def test_ranks_never_heard_from_hold_the_one_that_stopped_until_their_last_lines_say():
    """The cockpit following 512 ranks reads a few: when every rank it hears waits, the one that
    stopped is among the rest, not the waiting ones; their last lines, read once, name it."""
    watch = HangWatch(HangRule(multiple=5, floor=1.0))
    running(watch, phases=(PodPhase.RUNNING,) * 4)
    watch.lines(start(0.0, pids=(1,))[:1] + steps(1, 10, at=1.0, every=0.5, ranks=(0,)))
    watch.lines([LogLine("p0", 0, 9.0, "event=waiting step=11 seconds=3.5 rank=0 world=4")])
    hang = watch.check(now=12.0)
    assert hang.stopped == () and hang.waiting == (0,) and hang.unheard == (1, 2, 3)
    assert hang.one_line().startswith("hang: one of 3 ranks not heard from stopped after step 10")
    # the others' last lines, read once (older ones after newer: any order)
    watch.lines([LogLine("p1", 1, 9.1, "event=waiting step=11 seconds=3.6 rank=1 world=4"),
                 LogLine.parsed("p2", 2, 5.6, "step=10 loss=0.5 rank=2 world=4"),
                 LogLine.parsed("p3", 3, 5.4, "step=9 loss=0.5 rank=3 world=4")])
    hang = watch.check(now=12.0)
    assert hang.stopped == (3,) and hang.unheard == ()
