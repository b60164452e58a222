"""A slow rank found from the ranks' own compute times (backend/stragglers.py): named within three
windows when one of four ranks computes at half speed, never in an undisturbed run with jitter."""

from __future__ import annotations

import random

import pytest

from backend.models import LogLine, Pod, PodPhase
from backend.stragglers import StragglerRule, StragglerWatch

COMPUTE, COLLECTIVE = 0.020, 0.002  # a rank's compute and the all-reduce's own cost, seconds


def run(first: int, last: int, factors: dict[int, float], ranks: int = 4, seed: int = 7) -> list[LogLine]:
    """Step lines of `ranks` ranks with ±20% jitter each; a rank at factor f computes 1/f as long,
    and every rank waits for the slowest of the step (synchronous data parallelism)."""
    jitter = random.Random(seed)
    lines = []
    for step in range(first, last + 1):
        compute = {r: COMPUTE * jitter.uniform(0.8, 1.2) / factors.get(r, 1.0) for r in range(ranks)}
        slowest = max(compute.values())
        for rank, seconds in compute.items():
            wait = slowest - seconds + COLLECTIVE
            lines.append(LogLine.parsed(f"p{rank}", rank, 100.0 + step, f"step={step} loss=0.5 rank={rank} "
                                        f"world={ranks} compute={seconds:.6f} wait={wait:.6f}"))
    return lines


def started(ranks: int = 4) -> list[LogLine]:
    return [LogLine(f"p{r}", r, 99.0, f"event=training_started step=0 rank={r} world={ranks}") for r in range(ranks)]


def test_one_rank_of_four_at_half_speed_is_named_within_three_windows():
    rule = StragglerRule(window=20, warmup=5)
    watch = StragglerWatch(rule)
    watch.lines(started() + run(1, 45, {}))  # two windows undisturbed (6-25, 26-45)
    assert watch.windows == 2 and watch.stragglers == ()
    slowed_at = 46
    for window in range(1, 4):  # then rank 2 at factor 0.5, fed window by window
        watch.lines(run(slowed_at + (window - 1) * 20, slowed_at + window * 20 - 1, {2: 0.5}, seed=window))
        if watch.stragglers:
            break
    assert window <= 3 and [s.rank for s in watch.stragglers] == [2]
    (slow,) = watch.stragglers
    assert slow.speed == pytest.approx(0.5, abs=0.08)
    # the others wait the straggler's extra compute: about half of their step
    assert 0.35 < slow.group_wait < 0.6, slow
    assert slow.one_line() == (f"straggler rank 2: {slow.speed:.2f}x the group's speed, the group waits "
                               f"{slow.group_wait:.0%} of each step for it")


def test_no_rank_is_named_in_an_undisturbed_run_of_300_steps():
    watch = StragglerWatch(StragglerRule(window=20, warmup=5))
    named = []
    for first in range(1, 301, 10):  # fed as batches come, ten steps at a time
        watch.lines((started() if first == 1 else []) + run(first, first + 9, {}, seed=first))
        named += watch.stragglers
    assert watch.windows == 14 and named == []


def test_warm_up_is_not_judged_and_a_new_attempt_starts_afresh():
    watch = StragglerWatch(StragglerRule(window=10, warmup=5))
    # rank 1 slow in its first steps only (a first step's set-up): the warm-up, left out
    watch.lines(started() + run(1, 5, {1: 0.2}) + run(6, 15, {}))
    assert watch.windows == 1 and watch.stragglers == ()
    watch.lines(run(16, 25, {1: 0.5}))
    assert watch.stragglers == ()  # one slow window is not enough: a moment descheduled looks so
    watch.lines(run(26, 35, {1: 0.5}))
    assert [s.rank for s in watch.stragglers] == [1]
    watch.lines(run(36, 45, {}))
    assert watch.stragglers == ()  # at speed again
    watch.pod(Pod(name="p1", job="j", rank=1, restart_attempt=1, created=0.0, phase=PodPhase.RUNNING))
    assert watch.stragglers == () and watch.windows == 0


def test_a_group_of_two_can_name_its_slow_rank_and_lines_without_compute_are_ignored():
    watch = StragglerWatch(StragglerRule(window=10, warmup=0))
    watch.lines([LogLine.parsed("p0", 0, 1.0, "step=1 loss=0.5 rank=0 world=2")])  # an older worker
    assert watch.windows == 0
    watch.lines(run(1, 20, {0: 0.5}, ranks=2))
    assert [s.rank for s in watch.stragglers] == [0]


def test_a_rank_whose_lines_stop_coming_holds_no_window_up():
    """The cockpit following a large group reads the logs of the ranks it shows: one it stops
    reading falls silent, and the others' windows are judged without it."""
    watch = StragglerWatch(StragglerRule(window=10, warmup=0))
    watch.lines(run(1, 10, {}))
    assert watch.windows == 1
    watch.lines([line for line in run(11, 40, {1: 0.5}) if line.rank != 3])  # rank 3 no longer read
    assert watch.windows == 4 and [s.rank for s in watch.stragglers] == [1]
