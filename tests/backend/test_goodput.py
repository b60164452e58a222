"""The goodput model on synthetic worker lines: each part from a timeline whose answer is known,
and the anchor's own worked examples (ml-goodput-measurement, tests/goodput_test.py) to the second."""

from __future__ import annotations

import pytest

from backend.goodput import PARTS, Goodput, goodput_of
from backend.models import LogLine


class Timeline:
    """Two workers' lines at chosen times (what `stream_logs` yields, merged)."""

    def __init__(self, world: int = 2) -> None:
        self.lines: list[LogLine] = []
        self.world = world
        self._pid = 100

    def add(self, at: float, text: str, rank: int = 0) -> None:
        self.lines.append(LogLine.parsed(f"pod-{rank}", rank, at, text))

    def start(self, at: float) -> None:
        """A group formed (every rank's `event=start`, printed after rendezvous)."""
        for rank in range(self.world):
            self._pid += 1
            self.add(at, f"event=start rank={rank} world={self.world} pid={self._pid} steps=100 restart=0", rank)

    def training(self, at: float, step: int = 0) -> None:
        for rank in range(self.world):
            self.add(at, f"event=training_started step={step} rank={rank} world={self.world}", rank)

    def resumed(self, at: float, from_step: int, restore: float = 0.0) -> None:
        for rank in range(self.world):
            self.add(at, f"event=resumed from_step={from_step} rank={rank} world={self.world} "
                         f"checkpoint_world={self.world} restore_seconds={restore:.6f}", rank)

    def steps(self, first: int, last: int, at: float, every: float,
              waits: dict[int, float] | None = None) -> float:
        """Step lines first..last (a step's line is its end), one every `every` seconds from `at`;
        the time of the last."""
        t = at
        for step in range(first, last + 1):
            for rank in range(self.world):
                wait = (waits or {}).get(step)
                extra = f" ckpt_wait={wait:.6f}" if wait is not None and rank == 0 else ""
                self.add(t, f"step={step} loss=0.500000 rank={rank} world={self.world}{extra}", rank)
            t += every
        return t - every

    def done(self, at: float, step: int, wait: float = 0.0) -> None:
        for rank in range(self.world):
            self.add(at, f"event=done step={step} rank={rank} world={self.world} final_loss=0.1 "
                         f"ckpt_wait={wait:.6f}", rank)


def approx(value: float) -> object:
    return pytest.approx(value, abs=1e-9)


# ---------------------------------------------------------------------------- the anchor's examples
# ml_goodput_measurement/tests/goodput_test.py records step *starts*; a step's line here is its
# end, which is the next step's start. Anchor step k (0-based) is step k + 1 here, and its start
# is the line of step k (the first one's: event=training_started).

def test_the_anchors_startup_badput_example():
    """`test_goodput_with_startup_badput`: 5 s from the job's start to step 0, five steps of 3 s,
    step 0 taking 5 s more; the job ends after the last step. Expected: 5 x 3 s of 25 s, 60%."""
    t = Timeline()
    t.start(0.0)  # the program's start is the anchor's job start
    t.training(5.0)
    t.steps(1, 1, at=13.0, every=3.0)  # 3 s + the 5 s extra
    last = t.steps(2, 5, at=16.0, every=3.0)
    t.done(last, 5)
    report = goodput_of(t.lines, started=0.0, finished=25.0)
    assert report.productive == approx(15.0)
    assert report.goodput == approx(0.60)
    assert report.program_startup == approx(5.0)  # the first step's excess (BadputType.PROGRAM_STARTUP)
    assert report.training_prep == approx(5.0)  # the anchor's unrecorded OTHER before step 0


def test_the_anchors_partial_restart_example():
    """GoodputDisruptionPartialRestartTest: steps 0-4 every 3 s from 5 s, a disruption, the job
    starts again at 25 s and resumes from step 2 at 30 s, steps 2-4 every 3 s, queried 2 s after
    the last step start (41 s). Expected productive (5 - 1) x 3 s, goodput 12 / 41."""
    t = Timeline()
    t.start(0.0)
    t.training(5.0)
    t.steps(1, 4, at=8.0, every=3.0)  # anchor steps 0-3 end at 8, 11, 14, 17; step 4 never ends
    t.start(25.0)
    t.resumed(25.0, from_step=2)
    t.training(30.0, step=2)
    t.steps(3, 4, at=33.0, every=3.0)  # anchor steps 2 and 3 end at 33 and 36
    report = Goodput(started=0.0)
    report.feed_lines(t.lines)
    report = report.report(now=41.0)
    assert report.productive == approx(12.0)
    assert report.goodput == approx(12.0 / 41.0)
    assert report.wasted_progress == approx(6.0)  # anchor steps 2 and 3 of the first segment
    assert report.infrastructure_recovery == approx(25.0 - 17.0)  # the job's restart - step 4's start
    assert report.steps_lost == 2 and report.steps_kept == 4 and report.restarts == 1


def test_the_anchors_complete_restart_example():
    """GoodputDisruptionCompleteRestartTest: the same, but the job starts over from step 0 and
    runs steps 0-2 (queried at 38 s): only the new segment's steps 0 and 1 count."""
    t = Timeline()
    t.start(0.0)
    t.training(5.0)
    t.steps(1, 4, at=8.0, every=3.0)
    t.start(25.0)
    t.training(30.0)
    t.steps(1, 2, at=33.0, every=3.0)
    model = Goodput(started=0.0)
    model.feed_lines(t.lines)
    report = model.report(now=38.0)
    assert report.productive == approx(2 * 3.0)
    assert report.goodput == approx(6.0 / 38.0)
    assert report.wasted_progress == approx(4 * 3.0) and report.steps_lost == 4


# ---------------------------------------------------------------------------- each part

def test_a_run_without_failures_is_start_up_prep_productive_then_its_final_save():
    t = Timeline()
    t.start(2.0)
    t.training(3.0)
    last = t.steps(1, 11, at=5.0, every=1.0)  # step 1 took 2 s (1 s more than the others)
    t.done(last + 0.5, 11, wait=0.3)
    report = goodput_of(t.lines, started=0.0, finished=16.0)
    assert report.program_startup == approx(2.0 + 1.0)  # before the group formed, and step 1's excess
    assert report.training_prep == approx(1.0)
    assert report.productive == approx(1.0 + 10.0)  # step 1's mean share, then steps 2..11
    assert report.checkpoint_save == approx(0.3)
    assert report.other == approx(16.0 - 15.0 - 0.3)
    assert report.wasted_progress == 0 and report.infrastructure_recovery == 0 and report.restarts == 0
    assert report.steps_kept == 11 and report.step_seconds == approx(1.0)
    assert report.finished


def test_a_step_after_a_save_counts_its_wait_as_checkpoint_save():
    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 7, at=1.0, every=1.0, waits={6: 0.25})  # the loop waited 0.25 s inside step 6
    t.add(5.5, "event=checkpoint_saved step=5 reason=periodic file=x bytes=1 seconds=0.2 rank=0")
    report = goodput_of(t.lines)
    assert report.checkpoint_save == approx(0.25)
    # step 1 (1 s) exceeds the mean of steps 2-7 without the wait (5.75 s / 6): start-up
    assert report.program_startup == approx(1.0 - 5.75 / 6)
    assert report.productive == approx(7.0 - 0.25 - (1.0 - 5.75 / 6))
    assert report.saves == 1 and report.save_stall == approx(0.25)


def test_a_checkpoint_load_is_restore_and_the_rest_of_the_start_is_prep():
    t = Timeline()
    t.start(1.0)
    t.resumed(3.5, from_step=4, restore=2.0)
    t.training(3.6, step=4)
    t.steps(5, 8, at=4.6, every=1.0)
    report = goodput_of(t.lines, started=0.0)
    assert report.program_startup == approx(1.0)
    assert report.checkpoint_restore == approx(2.0)
    assert report.training_prep == approx(0.6)
    assert report.productive == approx(4.0)


def test_a_restart_from_an_older_checkpoint_wastes_the_steps_done_again():
    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 12, at=1.0, every=1.0)  # step 12 at 12 s; the last checkpoint is step 10
    t.start(20.0)  # the new group
    t.resumed(21.0, from_step=10)
    t.training(21.0, step=10)
    t.steps(11, 20, at=22.0, every=1.0)  # steps 11 and 12 again, then on to 20 at 31 s
    report = goodput_of(t.lines, started=0.0)
    assert report.restarts == 1 and report.steps_lost == 2
    assert report.wasted_progress == approx(2.0)  # steps 11 and 12 of the first group
    assert report.infrastructure_recovery == approx(20.0 - 12.0)  # step 13's start -> the group formed
    assert report.training_prep == approx(1.0)
    assert report.productive == approx(10.0 + 10.0)
    assert report.steps_kept == 20


def test_a_survivors_save_at_teardown_is_checkpoint_save_inside_the_recovery():
    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 12, at=1.0, every=1.0)
    # rank 0 noticed at 12.6 s (its collective failed), saved step 12 in 0.4 s
    t.add(13.0, "event=checkpoint_saved step=12 reason=peer_failure file=x bytes=1 seconds=0.4 rank=0")
    t.start(15.0)
    t.resumed(16.0, from_step=12)
    t.training(16.0, step=12)
    t.steps(13, 14, at=17.0, every=1.0)
    report = goodput_of(t.lines, started=0.0)
    assert report.steps_lost == 0 and report.wasted_progress == 0
    assert report.checkpoint_save == approx(0.4)
    assert report.infrastructure_recovery == approx(15.0 - 12.0 - 0.4)
    assert report.productive == approx(12.0 + 2.0)


def test_a_group_that_fails_while_starting_is_recovery_until_a_group_steps():
    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 3, at=1.0, every=1.0)
    t.start(5.0)  # fails before its first step
    t.start(8.0)
    t.resumed(9.0, from_step=3)
    t.training(9.0, step=3)
    t.steps(4, 5, at=10.0, every=1.0)
    report = goodput_of(t.lines, started=0.0)
    assert report.restarts == 2
    assert report.infrastructure_recovery == approx(8.0 - 3.0) and report.wasted_progress == 0
    assert report.training_prep == approx(1.0)


def test_a_single_step_segment_is_all_productive():
    """The anchor's `_compute_segment_final_metrics`: with one step there is no mean to exceed."""
    t = Timeline()
    t.start(0.0)
    t.training(1.0)
    t.steps(1, 1, at=4.0, every=1.0)
    report = goodput_of(t.lines, started=0.0)
    assert report.productive == approx(3.0) and report.program_startup == 0


def test_parts_add_up_to_the_wall_time():
    t = Timeline()
    t.start(0.5)
    t.training(1.0)
    t.steps(1, 9, at=2.0, every=0.5, waits={6: 0.1})
    t.add(6.3, "event=checkpoint_saved step=9 reason=sigterm file=x bytes=1 seconds=0.1 rank=1", 1)
    t.start(8.0)
    t.resumed(8.5, from_step=9, restore=0.3)
    t.training(8.6, step=9)
    last = t.steps(10, 30, at=9.0, every=0.5, waits={11: 0.2, 16: 0.05})
    t.done(last + 0.2, 30, wait=0.15)
    report = goodput_of(t.lines, started=0.0, finished=last + 1.0, failures=[6.1])
    assert sum(seconds for _, seconds in report.parts()) == approx(report.total)
    assert [name for name, _ in report.parts()] == list(PARTS)
    assert set(report.badput()) == {"PROGRAM_STARTUP", "TRAINING_PREP", "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME",
                                     "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME", "WASTED_PROGRESS_FROM_DISRUPTION",
                                     "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION", "OTHER"}


# ---------------------------------------------------------------------------- each restart apart

def test_a_restart_is_taken_apart_from_the_failure_to_the_first_step():
    from backend.models import Pod, PodPhase

    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 5, at=1.0, every=1.0)
    t.add(5.9, "event=checkpoint_saved step=5 reason=peer_failure file=x bytes=1 seconds=0.3 rank=0")
    t.start(7.0)
    t.resumed(7.5, from_step=5)
    t.training(7.5, step=5)
    t.steps(6, 7, at=8.5, every=1.0)
    model = Goodput(started=0.0)
    model.observe_pod(Pod(name="j-0-1", job="j", rank=1, created=0.0, phase=PodPhase.FAILED, finished=5.5))
    for rank, started in ((0, 6.6), (1, 6.7)):
        model.observe_pod(Pod(name=f"j-1-{rank}", job="j", rank=rank, restart_attempt=1, created=6.2,
                              phase=PodPhase.RUNNING, started=started))
    model.feed_lines(t.lines)
    (restart,) = model.report().restart_times
    assert (restart.failure_seen, restart.survivors_saved, restart.pods_created, restart.pods_started,
            restart.group_formed, restart.checkpoint_loaded, restart.first_step) == (5.5, 5.9, 6.2, 6.7, 7.0, 7.5, 8.5)
    assert restart.seconds == approx(3.0)
    assert [name for name, _ in restart.stages()] == ["survivors_saved", "pods_created", "pods_started",
                                                      "group_formed", "checkpoint_loaded", "first_step"]
    assert sum(seconds for _, seconds in restart.stages()) == approx(3.0)


def test_a_whole_second_point_before_the_one_it_follows_counts_as_that_one_and_the_stages_add_up():
    """The pods' creation from the API is truncated to the second: 6.0 for new pods made at 6.95,
    after the survivors' save at 6.4. Their start (6.99) is not 0.99 s after it."""
    from backend.goodput.report import RestartTimes

    restart = RestartTimes(attempt=1, failure_seen=6.1, survivors_saved=6.4, pods_created=6.0, pods_started=6.99,
                           group_formed=7.1, checkpoint_loaded=7.2, first_step=8.0)
    stages = dict(restart.stages())
    assert stages["pods_created"] == 0.0 and stages["pods_started"] == approx(0.59)
    assert sum(stages.values()) == approx(restart.seconds) == approx(1.9)


def test_a_restarts_processes_start_is_the_kernels_where_the_start_lines_give_it():
    """Pods carry whole seconds; a start line's process_started (from /proc, to 10 ms) is taken
    instead, the group's from its last rank."""
    from backend.models import Pod, PodPhase

    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 5, at=1.0, every=1.0)
    t.add(5.9, "event=checkpoint_saved step=5 reason=peer_failure file=x bytes=1 seconds=0.3 rank=0")
    for rank, began in ((0, 6.41), (1, 6.48)):
        t.add(7.0, f"event=start rank={rank} world=2 pid={100 + rank} process_started={began}")
    t.resumed(7.5, from_step=5)
    t.training(7.5, step=5)
    t.steps(6, 7, at=8.5, every=1.0)
    model = Goodput(started=0.0)
    model.observe_pod(Pod(name="j-1-0", job="j", rank=0, restart_attempt=1, created=6.0,
                          phase=PodPhase.RUNNING, started=6.0))
    model.feed_lines(t.lines)
    (restart,) = model.report().restart_times
    assert (restart.pods_created, restart.pods_started, restart.group_formed) == (6.0, 6.48, 7.0)


# ---------------------------------------------------------------------------- live

def _saved_killed_and_resumed() -> Timeline:
    """Steps 1-12 with two saves' stalls, a restart from step 10, steps 11-15 again."""
    t = Timeline()
    t.start(0.0)
    t.training(0.5)
    t.steps(1, 12, at=1.0, every=1.0, waits={6: 0.2, 11: 0.1})
    t.start(20.0)
    t.resumed(21.0, from_step=10, restore=0.4)
    t.training(21.0, step=10)
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
    assert before.steps_lost == 0 and before.productive == approx(12.0 - 0.5 - 0.3)


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


def test_live_after_a_reported_failure_the_time_since_the_interrupted_step_began_is_recovery():
    live = Goodput(started=0.0)
    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 4, at=1.0, every=1.0)
    live.feed_lines(t.lines)
    assert live.report(now=4.5).other == approx(0.5)  # a step in flight: not attributed yet
    live.failure(4.6)
    report = live.report(now=10.0)
    assert report.infrastructure_recovery == approx(6.0) and report.other == 0
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
    assert report.program_startup == approx(3.0) and report.goodput == 0


def test_one_line_names_the_parts():
    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 12, at=1.0, every=1.0)
    t.start(20.0)
    t.resumed(21.0, from_step=10)
    t.training(21.0, step=10)
    t.steps(11, 15, at=22.0, every=1.0)
    line = goodput_of(t.lines, started=0.0).one_line()
    assert line.startswith("goodput 0.58 of 26.0s: productive 15.0s")
    assert "wasted progress 2.0s (2 steps)" in line and "infrastructure recovery 8.0s (1 restart)" in line


def test_a_failed_pod_is_a_failure_at_its_end_once_however_often_it_is_seen():
    from backend.models import Pod, PodPhase

    t = Timeline()
    t.start(0.0)
    t.training(0.0)
    t.steps(1, 5, at=1.0, every=1.0)
    live = Goodput(started=0.0)
    killed = Pod(name="job-node-0-1-abcde", job="job", rank=1, created=0.0, phase=PodPhase.FAILED, finished=5.5)
    for pod in (killed, killed):
        live.observe_pod(pod)
    live.feed_lines(t.lines)
    assert live._failures == [5.5]
    assert live.report(now=8.0).infrastructure_recovery == approx(3.0)


def test_a_restarted_group_is_a_new_attempt_though_its_workers_have_the_same_pids():
    """A pod's pid is its own PID namespace's (node/pidns.py, as on any cluster): every attempt's
    warm worker is PID 2. What tells the attempts apart is when each process started."""
    t = Timeline()
    for attempt, at in enumerate((0.0, 25.0)):
        for rank in range(t.world):
            t.add(at, f"event=start rank={rank} world=2 pid=2 steps=100 restart={attempt} "
                      f"process_started={at - 1:.3f}", rank)
        t.training(at + 5.0)
        t.steps(1, 4 if attempt == 0 else 2, at=at + 8.0, every=3.0)
    model = Goodput(started=0.0)
    model.feed_lines(t.lines)
    assert len(model.attempts) == 2
