"""The failure timeline's model, fed as the screen feeds it: pod events and log lines, in the
order they happen to arrive (a worker's lines may come before its pod's first event)."""

from __future__ import annotations

from backend.models import JobPhase, JobSummary, LogLine, Pod, PodEvent, PodEventType, PodPhase
from tui.model.timeline import FailureTimeline


def ev(kind: str, name: str, rank: int, attempt: int, phase: PodPhase, **kw) -> PodEvent:
    return PodEvent(type=PodEventType(kind), pod=Pod(name=name, job="j", rank=rank, restart_attempt=attempt,
                                                     phase=phase, **kw))


def test_a_kill_and_the_recovery_each_timed_from_the_failure():
    t = two_ranks_stepping(12)
    assert t.restarts() == []
    t.pod_event(ev("MODIFIED", "j-node-0-1-old1x", 1, 0, PodPhase.FAILED, created=100.0, started=101.0,
                   finished=120.0, reason="Killed", exit_code=137), 120.0)
    t.add_lines([LogLine("j-node-0-0-old0x", 0, 120.2, "event=checkpoint_saved step=12 reason=peer_failure "
                         "file=x bytes=9 seconds=0.050000 rank=0")])
    t.pod_event(ev("DELETED", "j-node-0-0-old0x", 0, 0, PodPhase.RUNNING, created=100.0), 120.5)
    t.pod_event(ev("DELETED", "j-node-0-1-old1x", 1, 0, PodPhase.FAILED, created=100.0, finished=120.0,
                   reason="Killed", exit_code=137), 120.5)
    # the new group's lines arrive before its pods' events
    t.add_lines([LogLine("j-node-0-0-new0y", 0, 122.0, "event=start rank=0 world=2 pid=7 steps=40 restart=1"),
                 LogLine("j-node-0-0-new0y", 0, 122.5, "event=resumed from_step=12 rank=0 world=2"),
                 LogLine.parsed("j-node-0-0-new0y", 0, 123.0, "step=13 loss=0.4 rank=0 world=2")])
    restart = t.restarts()  # not placed yet: nobody said which attempt those pods are
    for rank in (0, 1):
        t.pod_event(ev("ADDED", f"j-node-0-{rank}-new{rank}y", rank, 1, PodPhase.RUNNING, created=120.8,
                       started=121.5), 121.5)
    [restart] = t.restarts()
    assert restart.attempt == 0 and restart.failed_at == 120.0
    assert restart.recovery_seconds == 3.0 and restart.steps_lost == 0
    offsets = [(round(m.at - restart.failed_at, 1), m.kind) for m in restart.moments]
    assert offsets == [(0.0, "failure"), (0.0, "info"), (0.2, "save"), (0.5, "down"), (0.8, "up"),
                       (1.5, "up"), (2.0, "up"), (2.5, "resume"), (3.0, "step")]
    texts = [m.what for m in restart.moments]
    # why the rank died: the kubelet's reason, the exit code and the signal it stands for, and
    # the rank's last line
    assert texts[0] == "failure seen: pod 1-old1x (rank 1) Killed, exit 137 (SIGKILL)"
    assert texts[1] == "rank 1's last line: step=12 loss=0.5 rank=1 world=2"
    assert "saved step 12 (peer_failure, 0.05 s)" in texts[2]
    assert texts[7] == "checkpoint loaded: resumed from step 12"


def test_steps_lost_when_the_newest_checkpoint_is_older_than_the_last_step():
    t = FailureTimeline("j")
    t.pod_event(ev("ADDED", "j-a", 0, 0, PodPhase.RUNNING, created=1.0), 1.0)
    t.add_lines([LogLine.parsed("j-a", 0, 2.0, "step=17 loss=0.1 rank=0 world=1")])
    t.pod_event(ev("DELETED", "j-a", 0, 0, PodPhase.RUNNING, created=1.0), 5.0)
    t.pod_event(ev("ADDED", "j-b", 0, 1, PodPhase.RUNNING, created=5.5, started=6.0), 6.0)
    t.add_lines([LogLine("j-b", 0, 7.0, "event=resumed from_step=15 rank=0 world=1"),
                 LogLine.parsed("j-b", 0, 7.5, "step=16 loss=0.1 rank=0 world=1")])
    [restart] = t.restarts()
    assert restart.steps_lost == 2 and restart.recovery_seconds == 2.5
    assert "deleted" in restart.moments[0].what


def test_whole_second_pod_times_are_ordered_by_when_they_were_seen():
    """Kubernetes keeps pod times to the second: a kill and the group's teardown in one second must
    not come out in any order. The deleted victim is the failure; the survivor's exit follows it."""
    t = FailureTimeline("j")
    for rank in (0, 1):
        t.pod_event(ev("ADDED", f"j-{rank}-a", rank, 0, PodPhase.RUNNING, created=100.0, started=101.0), 101.3)
    t.add_lines([LogLine.parsed(f"j-{r}-a", r, 129.9, f"step=40 loss=0.5 rank={r} world=2") for r in (0, 1)])
    t.pod_event(ev("DELETED", "j-1-a", 1, 0, PodPhase.RUNNING, created=100.0, finished=130.0,
                   reason="Deleted"), 130.2)
    t.pod_event(ev("MODIFIED", "j-0-a", 0, 0, PodPhase.FAILED, created=100.0, finished=130.0,
                   reason="Error", exit_code=1), 130.6)
    for rank in (0, 1):
        t.pod_event(ev("ADDED", f"j-{rank}-b", rank, 1, PodPhase.RUNNING, created=130.0, started=130.0), 130.8)
    t.add_lines([LogLine("j-0-b", 0, 131.0, "event=resumed from_step=40 rank=0 world=2"),
                 LogLine.parsed("j-0-b", 0, 131.1, "step=41 loss=0.4 rank=0 world=2")])
    [restart] = t.restarts()
    assert restart.moments[0].what == "failure seen: pod 1-a (rank 1) Deleted"
    assert restart.failed_at == 130.2
    kinds = [m.kind for m in restart.moments]
    assert kinds.index("down") < kinds.index("up")  # torn down (130.6) before the new pods (130.8)
    assert round(restart.recovery_seconds, 1) == 0.9


def test_goodput_is_fed_with_the_timeline_and_counted_again_when_the_lines_come_again():
    """The failed pod's end is the failure; a log stream that reopens sends every line again, and
    the goodput counts them once."""
    t = FailureTimeline("j")
    t.job_seen(JobSummary(name="j", phase=JobPhase.RUNNING, num_nodes=1, created=0.0))
    t.pod_event(ev("ADDED", "j-a", 0, 0, PodPhase.RUNNING, created=0.0, started=1.0), 1.0)
    old = [LogLine("j-a", 0, 1.5, "event=start rank=0 world=1 pid=1 steps=9 restart=0")]
    old += [LogLine.parsed("j-a", 0, 2.0 + s, f"step={s} loss=0.5 rank=0 world=1") for s in range(1, 6)]
    t.add_lines(old)  # step 5 at 7 s
    t.pod_event(ev("MODIFIED", "j-a", 0, 0, PodPhase.FAILED, created=0.0, finished=7.5, reason="Killed"), 7.5)
    new = [LogLine("j-b", 0, 9.0, "event=start rank=0 world=1 pid=2 steps=9 restart=1"),
           LogLine("j-b", 0, 9.5, "event=resumed from_step=5 rank=0 world=1"),
           LogLine.parsed("j-b", 0, 10.0, "step=6 loss=0.4 rank=0 world=1")]
    t.add_lines(new)
    report = t.goodput_report(now=10.0)
    assert (report.program_startup, report.productive, report.wasted_progress, report.infrastructure_recovery,
            report.training_prep) == (2.0, 5.5, 0.0, 2.0, 0.5)
    t.lines_resent()
    t.add_lines(old + new)
    assert t.goodput_report(now=10.0) == report
    t.job_seen(JobSummary(name="j", phase=JobPhase.COMPLETE, num_nodes=1, created=0.0, finished=10.0))
    assert t.goodput_report(now=99.0).total == 10.0
    t.reset(None)
    assert t.goodput_report(now=99.0) is None


def test_a_survivors_save_seen_before_the_failed_pods_event_still_comes_after_the_failure():
    """Under load the watch event of the killed pod arrives after the survivor's save line: the
    save began because of the failure, so the failure is placed no later than that."""
    t = FailureTimeline("j")
    for rank in (0, 1):
        t.pod_event(ev("ADDED", f"j-{rank}-a", rank, 0, PodPhase.RUNNING, created=100.0, started=101.0), 101.0)
    t.add_lines([LogLine("j-0-a", 0, 130.3, "event=checkpoint_saved step=9 reason=peer_failure file=x "
                         "bytes=9 seconds=0.1 rank=0")])
    t.pod_event(ev("MODIFIED", "j-1-a", 1, 0, PodPhase.FAILED, created=100.0, finished=130.0,
                   reason="Killed", exit_code=137), 130.8)  # seen 0.8 s late: 130.8 counts
    t.pod_event(ev("ADDED", "j-0-b", 0, 1, PodPhase.RUNNING, created=131.0, started=131.0), 131.5)
    t.add_lines([LogLine.parsed("j-0-b", 0, 132.0, "step=10 loss=0.4 rank=0 world=2")])
    [restart] = t.restarts()
    assert [m.kind for m in restart.moments][:2] == ["failure", "save"]
    assert round(restart.failed_at, 6) == 130.2 and round(restart.recovery_seconds, 1) == 1.8


def test_a_batch_tells_what_its_lines_one_at_a_time_tell():
    """Step lines are counted per batch (the hot path): the facts and the goodput must be those
    of the same lines fed one by one, start, save, resume and ckpt_wait lines among them."""
    lines = [LogLine(f"j-{r}", r, 1.0, f"event=start rank={r} world=2 pid={r + 5} steps=40 restart=0")
             for r in (0, 1)]
    lines += [LogLine.parsed(f"j-{r}", r, 2.0 + s, f"step={s} loss=0.5 rank={r} world=2"
                             + (" ckpt_wait=0.2" if s == 4 and r == 0 else "")) for s in range(1, 8) for r in (0, 1)]
    lines += [LogLine("j-1", 1, 9.5, "event=checkpoint_saved step=7 reason=sigterm seconds=0.1 rank=1")]
    lines += [LogLine("j-2", 0, 12.0, "event=start rank=0 world=2 pid=9 steps=40 restart=1"),
              LogLine("j-2", 0, 12.5, "event=resumed from_step=5 rank=0 world=2")]
    lines += [LogLine.parsed("j-2", 0, 13.0 + s, f"step={s} loss=0.4 rank=0 world=2") for s in range(6, 9)]
    one_by_one, batched = FailureTimeline("j"), FailureTimeline("j")
    for line in lines:
        one_by_one.add_lines([line])
    batched.add_lines(lines)
    assert batched.pods == one_by_one.pods and list(batched.pods) == ["j-0", "j-1", "j-2"]
    assert batched.goodput.report(now=30.0) == one_by_one.goodput.report(now=30.0)
    assert batched.goodput.report(now=30.0).restarts == 1


def test_late_pod_events_never_put_the_first_step_before_the_new_pods_and_recovery_agrees_with_goodput():
    """Under load a pod's watch event arrives after the lines its process printed: the new group's
    first step was printed at 124.5, its pods' events are seen at 125.2. Nothing of the new group
    can come before its pods exist, nor the teardown after the new group's first line. The header's
    "recovered in" is the goodput's seconds for that restart (failure seen to first step)."""
    t = FailureTimeline("j")
    t.job_seen(JobSummary(name="j", phase=JobPhase.RUNNING, num_nodes=2, created=99.0))
    for rank in (0, 1):
        t.pod_event(ev("ADDED", f"j-node-0-{rank}-old{rank}x", rank, 0, PodPhase.RUNNING, created=100.0,
                       started=101.0), 101.0)
    t.add_lines([LogLine(f"j-node-0-{r}-old{r}x", r, 101.5, f"event=start rank={r} world=2 pid=1{r} steps=40 "
                         "restart=0") for r in (0, 1)])
    t.add_lines([LogLine.parsed(f"j-node-0-{r}-old{r}x", r, 102.0 + s, f"step={s} loss=0.5 rank={r} world=2")
                 for s in range(1, 12) for r in (0, 1)])
    t.pod_event(ev("MODIFIED", "j-node-0-1-old1x", 1, 0, PodPhase.FAILED, created=100.0, started=101.0,
                   finished=120.0, reason="Killed", exit_code=137), 120.0)
    t.add_lines([LogLine.parsed("j-node-0-0-old0x", 0, 120.3, "step=12 loss=0.5 rank=0 world=2"),
                 LogLine("j-node-0-0-old0x", 0, 120.6, "event=checkpoint_saved step=12 reason=peer_failure "
                         "file=x bytes=9 seconds=0.1 rank=0")])
    # the new group's lines, all before any event of its pods or of the old group's end
    t.add_lines([LogLine("j-node-0-0-new0y", 0, 123.0, "event=start rank=0 world=2 pid=7 steps=40 restart=1"),
                 LogLine("j-node-0-1-new1y", 1, 123.1, "event=start rank=1 world=2 pid=8 steps=40 restart=1"),
                 LogLine("j-node-0-0-new0y", 0, 123.5, "event=resumed from_step=12 rank=0 world=2"),
                 LogLine.parsed("j-node-0-0-new0y", 0, 124.5, "step=13 loss=0.4 rank=0 world=2")])
    t.pod_event(ev("DELETED", "j-node-0-0-old0x", 0, 0, PodPhase.RUNNING, created=100.0, finished=121.0), 125.0)
    t.pod_event(ev("DELETED", "j-node-0-1-old1x", 1, 0, PodPhase.FAILED, created=100.0, finished=120.0,
                   reason="Killed", exit_code=137), 125.0)
    for rank in (0, 1):
        t.pod_event(ev("ADDED", f"j-node-0-{rank}-new{rank}y", rank, 1, PodPhase.RUNNING, created=125.0,
                       started=125.0), 125.2)
    [restart] = t.restarts()
    kinds = [m.kind for m in restart.moments]
    whats = [m.what for m in restart.moments]
    order = ["failure seen", "rank 1's last line", "rank 0 saved", "group torn down", "new pods created",
             "2 new pods running", "rendezvous", "checkpoint loaded", "first step trained again"]
    assert [next(i for i, w in enumerate(whats) if w.startswith(o)) for o in order] == list(range(len(order))), whats
    assert kinds[-1] == "step" and all(a.at <= b.at for a, b in zip(restart.moments, restart.moments[1:]))
    [times] = t.goodput_report(now=125.0).restart_times
    assert round(restart.recovery_seconds, 6) == round(times.seconds, 6) == 4.5  # 120.0 → 124.5


def test_a_rank_the_kernel_killed_at_its_memory_limit_is_said_to_be_oomkilled():
    t = FailureTimeline("j")
    t.pod_event(ev("ADDED", "j-node-0-1-old1x", 1, 0, PodPhase.RUNNING, created=100.0, started=101.0), 101.0)
    t.add_lines([LogLine.parsed("j-node-0-1-old1x", 1, 102.0, "step=3 loss=0.5 rank=1 world=2")])
    t.pod_event(ev("MODIFIED", "j-node-0-1-old1x", 1, 0, PodPhase.FAILED, created=100.0, started=101.0,
                   finished=103.0, reason="OOMKilled", exit_code=137), 103.0)
    [restart] = t.restarts()
    assert [m.what for m in restart.moments][:2] == [
        "failure seen: pod 1-old1x (rank 1) OOMKilled, exit 137 (SIGKILL)",
        "rank 1's last line: step=3 loss=0.5 rank=1 world=2"]


def test_a_failed_ranks_last_line_full_of_brackets_is_shown_as_it_is():
    from tui.widgets.timeline_view import restart_content

    nasty = "[ray-train] up: env:// [rank=0, w… [/] [b]x[/b] [@click=app.quit]quit[/] [red"
    t = FailureTimeline("j")
    t.pod_event(ev("ADDED", "j-node-0-1-old1x", 1, 0, PodPhase.RUNNING, created=100.0, started=101.0), 101.0)
    t.add_lines([LogLine("j-node-0-1-old1x", 1, 102.0, nasty)])
    t.pod_event(ev("MODIFIED", "j-node-0-1-old1x", 1, 0, PodPhase.FAILED, created=100.0, started=101.0,
                   finished=103.0, reason="Error", exit_code=1), 103.0)
    [restart] = t.restarts()
    assert f"rank 1's last line: {nasty}" in restart_content(restart).plain


def two_ranks_stepping(steps: int) -> FailureTimeline:
    """Attempt 0's two pods running since 101, each rank printing steps 1..`steps` from 103."""
    t = FailureTimeline("j")
    for rank in (0, 1):
        t.pod_event(ev("ADDED", f"j-node-0-{rank}-old{rank}x", rank, 0, PodPhase.RUNNING, created=100.0,
                       started=101.0), 101.0)
    t.add_lines([LogLine.parsed(f"j-node-0-{r}-old{r}x", r, 102.0 + s, f"step={s} loss=0.5 rank={r} world=2")
                 for s in range(1, steps + 1) for r in (0, 1)])
    return t


def test_a_survivor_killed_by_the_teardown_after_saving_is_not_why_the_group_failed():
    """Rank 0 saved on the peer's failure, then the teardown SIGKILLed it, and its end was seen
    first; rank 1, whose node was lost, printed torchrun's failure report last. The timeline says
    rank 1 failed, quoting a line that tells something, not the report's `=====` rule."""
    t = two_ranks_stepping(5)
    t.add_lines([LogLine("j-node-0-1-old1x", 1, 108.0, "Failures:"),
                 LogLine("j-node-0-1-old1x", 1, 108.1, "=" * 60)])
    t.add_lines([LogLine("j-node-0-0-old0x", 0, 109.0, "event=checkpoint_saved step=5 reason=peer_failure "
                         "file=x bytes=9 seconds=0.1 rank=0")])
    t.pod_event(ev("MODIFIED", "j-node-0-0-old0x", 0, 0, PodPhase.FAILED, created=100.0, started=101.0,
                   finished=110.0, reason="Error", exit_code=137), 110.0)
    t.pod_event(ev("MODIFIED", "j-node-0-1-old1x", 1, 0, PodPhase.FAILED, created=100.0, started=101.0,
                   finished=111.0, reason="Error", exit_code=1), 111.0)
    [restart] = t.restarts()
    texts = [m.what for m in restart.moments]
    assert texts[0].startswith("failure seen: pod 1-old1x (rank 1) Error, exit 1"), texts
    assert not any("exit 137" in what and what.startswith("failure seen") for what in texts), texts
    assert "rank 1's last line: step=5 loss=0.5 rank=1 world=2" in texts, texts


def test_the_timelines_subtitle_is_in_the_past_once_recovered():
    from tui.model.timeline import Restart
    from tui.widgets.timeline_view import restarts_summary

    done = Restart(attempt=0, failed_at=1.0, moments=(), steps_lost=0, recovery_seconds=52.5)
    going = Restart(attempt=1, failed_at=80.0, moments=(), steps_lost=None, recovery_seconds=None)
    assert restarts_summary([done]) == "1 restart · training again after 52.5 s"
    assert restarts_summary([done, going]) == "2 restarts · recovering…"
    assert restarts_summary([done, done]) == "2 restarts · training again after 105.0 s in all"
