"""The goodput model on synthetic worker lines: each part from a timeline whose answer is known."""

from __future__ import annotations

import pytest

from backend.goodput import PARTS, Goodput, goodput_of
from backend.models import LogLine


class Timeline:
    """Two workers' lines at chosen times (what `stream_logs` yields, merged)."""

    def __init__(self) -> None:
        self.lines: list[LogLine] = []
        self._pid = 100

    def add(self, at: float, text: str, rank: int = 0) -> None:
        self.lines.append(LogLine.parsed(f"pod-{rank}", rank, at, text))

    def start(self, at: float, world: int = 2) -> None:
        for rank in range(world):
            self._pid += 1
            self.add(at, f"event=start rank={rank} world={world} pid={self._pid} steps=100 restart=0", rank)

    def steps(self, first: int, last: int, at: float, every: float, world: int = 2,
              waits: dict[int, float] | None = None) -> float:
        """Step lines first..last, one every `every` seconds from `at`; the time of the last."""
        t = at
        for step in range(first, last + 1):
            for rank in range(world):
                wait = (waits or {}).get(step)
                extra = f" ckpt_wait={wait:.6f}" if wait is not None and rank == 0 else ""
                self.add(t, f"step={step} loss=0.500000 rank={rank} world={world}{extra}", rank)
            t += every
        return t - every

    def restart(self, at: float, from_step: int, resumed_at: float) -> None:
        """A new group that starts at `at` and resumes from `from_step` at `resumed_at`."""
        self.start(at)
        self.add(resumed_at, f"event=resumed from_step={from_step} rank=0 world=2 checkpoint_world=2")

    def done(self, at: float, step: int, wait: float = 0.0) -> None:
        for rank in range(2):
            self.add(at, f"event=done step={step} rank={rank} world=2 final_loss=0.1 ckpt_wait={wait:.6f}", rank)


def approx(value: float) -> object:
    return pytest.approx(value, abs=1e-9)


def test_a_run_without_failures_is_start_up_then_productive_then_its_final_save():
    t = Timeline()
    t.start(2.0)
    last = t.steps(1, 11, at=5.0, every=1.0)  # step 1 at 5 s ... step 11 at 15 s
    t.done(last + 0.5, 11, wait=0.3)
    report = goodput_of(t.lines, started=0.0, finished=16.0)
    assert report.startup == approx(5.0)  # the job's start to its first step
    assert report.productive == approx(10.0)  # steps 2..11
    assert report.checkpoint_stall == approx(0.3)
    assert report.other == approx(16.0 - 15.0 - 0.3)
    assert report.lost_work == 0 and report.recovery == 0 and report.restarts == 0
    assert report.goodput == approx(10.0 / 16.0)
    assert report.steps_kept == 11 and report.step_seconds == approx(1.0)
    assert report.finished


def test_a_step_after_a_save_counts_its_wait_as_checkpoint_stall():
    t = Timeline()
    t.start(0.0)
    t.steps(1, 7, at=1.0, every=1.0, waits={6: 0.25})  # the loop waited 0.25 s inside step 6
    t.add(5.5, "event=checkpoint_saved step=5 reason=periodic file=x bytes=1 seconds=0.2 rank=0")
    report = goodput_of(t.lines)
    assert report.checkpoint_stall == approx(0.25)
    assert report.productive == approx(6.0 - 0.25)
    assert report.saves == 1 and report.stall_per_save == approx(0.25)


def test_a_restart_from_an_older_checkpoint_loses_the_steps_done_again():
    t = Timeline()
    t.start(0.0)
    t.steps(1, 12, at=1.0, every=1.0)  # step 12 at 12 s; the last checkpoint is step 10
    t.start(20.0)  # the new group
    for rank in range(2):
        t.add(21.0, f"event=resumed from_step=10 rank={rank} world=2 checkpoint_world=2", rank)
    t.steps(11, 20, at=22.0, every=1.0)  # steps 11 and 12 again, then on to 20 at 31 s
    report = goodput_of(t.lines, started=0.0)
    assert report.restarts == 1 and report.steps_lost == 2
    assert report.lost_work == approx(2.0)  # steps 11 and 12 of the first group, 1 s each
    assert report.recovery == approx(22.0 - 12.0)  # last step line -> first step of the new group
    assert report.productive == approx(9.0 + 9.0)  # steps 2..10, then 12..20 (11 was the first)
    assert report.startup == approx(1.0)
    assert report.steps_kept == 20


def test_a_survivors_save_keeps_every_step_and_marks_when_the_failure_was_seen():
    t = Timeline()
    t.start(0.0)
    t.steps(1, 12, at=1.0, every=1.0)
    # rank 0 noticed at 12.6 s (its collective failed), saved step 12 in 0.4 s
    t.add(13.0, "event=checkpoint_saved step=12 reason=peer_failure file=x bytes=1 seconds=0.4 rank=0")
    t.restart(15.0, from_step=12, resumed_at=16.0)
    t.steps(13, 14, at=17.0, every=1.0)
    report = goodput_of(t.lines, started=0.0)
    assert report.steps_lost == 0
    assert report.lost_work == approx(0.6)  # step 13's compute, cut off by the failure at 12.6 s
    assert report.recovery == approx(17.0 - 12.6)
    assert report.productive == approx(11.0 + 1.0)


def test_a_reported_failure_splits_the_gap_into_the_interrupted_step_and_recovery():
    t = Timeline()
    t.start(0.0)
    t.steps(1, 5, at=1.0, every=1.0)
    t.restart(9.0, from_step=5, resumed_at=9.5)
    t.steps(6, 8, at=10.0, every=1.0)
    report = goodput_of(t.lines, started=0.0, failures=[5.7])
    assert report.lost_work == approx(0.7)
    assert report.recovery == approx(10.0 - 5.7)
    # without the hint, the whole gap is recovery (from the last step before the failure)
    assert goodput_of(t.lines, started=0.0).recovery == approx(10.0 - 5.0)


def test_a_step_whose_line_comes_after_the_kill_is_kept_and_recovery_starts_at_its_line():
    """Seen in bench/goodput.py at 1 GB: rank 1 was killed 0.7 s before rank 0 printed step 40,
    whose all-reduce had already finished; the next group resumed from step 40. The kill once went
    unseen (it came before the attempt's last step line) and the next kill, a minute later, was
    taken for it: 11.8 s of recovery were booked as lost work."""
    t = Timeline()
    t.start(0.0)
    t.steps(1, 5, at=1.0, every=1.0)  # step 5 at 5.0 s
    t.restart(9.0, from_step=5, resumed_at=9.5)
    t.steps(6, 8, at=10.0, every=1.0)  # step 8 at 12.0 s
    t.restart(14.0, from_step=8, resumed_at=14.5)
    t.steps(9, 10, at=15.0, every=1.0)
    report = goodput_of(t.lines, started=0.0, failures=[4.6, 12.0])  # each kill before a step's line
    assert report.lost_work == approx(0.0) and report.steps_lost == 0
    assert report.recovery == approx((10.0 - 5.0) + (15.0 - 12.0))
    assert report.productive == approx(4.0 + 2.0 + 1.0)


def test_a_group_that_fails_while_starting_is_recovery_until_a_group_steps():
    t = Timeline()
    t.start(0.0)
    t.steps(1, 3, at=1.0, every=1.0)
    t.start(5.0)  # fails before its first step
    t.restart(8.0, from_step=3, resumed_at=9.0)
    t.steps(4, 5, at=10.0, every=1.0)
    report = goodput_of(t.lines, started=0.0)
    assert report.restarts == 2
    assert report.recovery == approx(10.0 - 3.0) and report.lost_work == 0


def test_parts_add_up_to_the_wall_time():
    t = Timeline()
    t.start(0.5)
    t.steps(1, 9, at=2.0, every=0.5, waits={6: 0.1})
    t.add(6.3, "event=checkpoint_saved step=9 reason=sigterm file=x bytes=1 seconds=0.1 rank=1", 1)
    t.restart(8.0, from_step=9, resumed_at=8.5)
    last = t.steps(10, 30, at=9.0, every=0.5, waits={11: 0.2, 16: 0.05})
    t.done(last + 0.2, 30, wait=0.15)
    report = goodput_of(t.lines, started=0.0, finished=last + 1.0, failures=[6.1])
    assert sum(seconds for _, seconds in report.parts()) == approx(report.total)
    assert [name for name, _ in report.parts()] == list(PARTS)


def _saved_killed_and_resumed() -> Timeline:
    """Steps 1-12 with two saves' stalls, a restart from step 10, steps 11-15 again."""
    t = Timeline()
    t.start(0.0)
    t.steps(1, 12, at=1.0, every=1.0, waits={6: 0.2, 11: 0.1})
    t.restart(20.0, from_step=10, resumed_at=21.0)
    t.steps(11, 15, at=22.0, every=1.0)
    return t


def test_live_lines_fed_one_by_one_give_the_same_report_as_the_whole_log():
    t = _saved_killed_and_resumed()
    live = Goodput(started=0.0)
    seen = []
    for line in t.lines:
        live.feed(line.time, line.text)
        seen.append(live.report())
    assert live.report() == goodput_of(t.lines, started=0.0)
    # before the new group resumed, steps 11 and 12 still counted as kept
    before = seen[[line.time for line in t.lines].index(20.0) - 1]
    assert before.steps_lost == 0 and before.productive == approx(11.0 - 0.3)


def test_step_lines_fed_already_parsed_give_the_same_report_as_their_text():
    """The cockpit hands runs of plain step lines over parsed (feed_steps, no second parse):
    every part must come out as feeding their text would give, stalls and restarts included."""
    t = _saved_killed_and_resumed()
    fast = Goodput(started=0.0)
    parsed, run = 0, []
    for line in t.lines:
        if line.step is not None and "event=" not in line.text and "ckpt_wait=" not in line.text:
            run.append(line)
            parsed += 1
            continue
        fast.feed_steps(run)
        run = []
        fast.feed(line.time, line.text)
    fast.feed_steps(run)
    assert parsed > 20  # the fast path was taken for most lines
    assert fast.report() == goodput_of(t.lines, started=0.0)


def test_live_after_a_reported_failure_the_time_since_is_recovery():
    live = Goodput(started=0.0)
    t = Timeline()
    t.start(0.0)
    t.steps(1, 4, at=1.0, every=1.0)
    live.feed_lines(t.lines)
    assert live.report(now=4.5).other == approx(0.5)  # a step in flight: not attributed yet
    live.failure(4.6)
    report = live.report(now=10.0)
    assert report.lost_work == approx(0.6) and report.recovery == approx(5.4)
    assert report.total == approx(10.0)


def test_lines_that_are_not_a_workers_say_nothing():
    live = Goodput()
    for text in ("hello", "Traceback (most recent call last):", "step=x loss=1", "event=start rank=a"):
        live.feed(1.0, text)
    report = live.report()
    assert report.productive == 0 and report.restarts == 0 and report.steps_kept == 0


def test_nothing_seen_yet_is_all_start_up_until_now():
    live = Goodput(started=100.0)
    report = live.report(now=103.0)
    assert report.startup == approx(3.0) and report.goodput == 0


def test_one_line_names_the_parts():
    t = Timeline()
    t.start(0.0)
    t.steps(1, 12, at=1.0, every=1.0)
    t.restart(20.0, from_step=10, resumed_at=21.0)
    t.steps(11, 15, at=22.0, every=1.0)
    line = goodput_of(t.lines, started=0.0).one_line()
    assert line.startswith("goodput 0.5")
    assert "lost work 2.0s (2 steps)" in line and "recovery 10.0s (1 restarts)" in line


def test_a_failed_pod_is_a_failure_at_its_end_once_however_often_it_is_seen():
    from backend.models import Pod, PodPhase

    t = Timeline()
    t.start(0.0)
    t.steps(1, 5, at=1.0, every=1.0)
    t.start(9.0)
    t.steps(6, 8, at=10.0, every=1.0)
    live = Goodput(started=0.0)
    killed = Pod(name="job-node-0-1-abcde", job="job", rank=1, created=0.0, phase=PodPhase.FAILED, finished=5.5)
    running = Pod(name="job-node-0-0-fghij", job="job", rank=0, created=9.0, phase=PodPhase.RUNNING)
    for pod in (killed, running, killed):
        live.observe_pod(pod)
    live.feed_lines(t.lines)
    report = live.report()
    assert report.lost_work == approx(0.5) and report.recovery == approx(10.0 - 5.5)
