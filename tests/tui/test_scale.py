"""The cockpit following a job of 512 ranks, fed through its real watches from a scripted cluster
(the synthetic feed): the pods panel summarises the group and keeps a row for the ranks worth one,
whose logs are the only ones read; a rank gone to is followed and judged behind; a failure, the
teardown of 512 pods and the new group read right in the failure timeline and the goodput; a
group that stops stepping is called a hang. The cost side is bench/tui_scale.py."""

from __future__ import annotations

from backend.models import MAX_FOLLOWED, LogLine, Pod, PodEvent, PodEventType, PodPhase
from tests.tui.conftest import wait_until
from tests.tui.scripted import JOB, T0, scripted_app
from tui.widgets.pods_table import HISTORY_PER_ATTEMPT

RANKS = 512


def name(rank: int, attempt: int) -> str:
    return f"{JOB}-node-0-{rank}-a{attempt}xyz"


def pod(rank: int, attempt: int, kind: PodEventType = PodEventType.ADDED, phase: PodPhase = PodPhase.RUNNING,
        **kw) -> PodEvent:
    return PodEvent(type=kind, pod=Pod(name=name(rank, attempt), job=JOB, rank=rank, restart_attempt=attempt,
                                       phase=phase, created=T0 + 30 * attempt, started=T0 + 30 * attempt + 1, **kw))


def line(rank: int, attempt: int, at: float, text: str) -> LogLine:
    return LogLine.parsed(name(rank, attempt), rank, T0 + at, text)


def steps(cluster, attempt: int, step: int, at: float, behind: dict[int, int] | None = None) -> list[LogLine]:
    """One step line from each rank the stream reads (as the client's stream reads only those);
    `behind`: ranks at an older step."""
    return [line(r, attempt, at, f"step={step - (behind or {}).get(r, 0)} loss=0.5 rank={r} world={RANKS}")
            for r in cluster.focus.ranks if r >= 0]


def summary(screen) -> str:
    return screen.query_one("#rank-summary").render().plain


async def shows(screen, text: str) -> None:
    """The summary above the pods says `text` (it is handed the group after the table's redraw)."""
    await wait_until(screen, lambda: text in summary(screen), f"the summary to say {text!r}")


async def test_512_ranks_summarised_a_rank_drilled_into_a_restart_timed_and_a_hang_called(home):
    app, cluster, now = scripted_app(home, nodes=RANKS)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB and cluster.focus is not None,
                         "the cockpit to follow the job")
        table = screen.pods_table
        assert cluster.focus.ranks == (0,)  # too many for a row each: rank 0 until the panel says
        for rank in range(RANKS):
            cluster.pods.put_nowait(pod(rank, 0))
        cluster.logs.put_nowait([line(0, 0, 2.0, f"event=start rank=0 world={RANKS} pid=100 steps=99 restart=0")])
        await wait_until(screen, lambda: table.group is not None and table.group.size == RANKS,
                         "the group's summary")
        assert table.group.phases == (("Running", RANKS),)
        assert table.row_count == 1 and cluster.focus.ranks == (0,)  # rank 0's row; its log alone is read
        assert table.usage_ranks == (0,)  # and its CPU and memory alone
        await shows(screen, "attempt 0 · 512 ranks: 512 Running")
        assert "logs of 0 of 512 ranks" in summary(screen)  # nothing read yet, and it says so

        # A person goes to ranks 17 and 42: their rows stay, their logs are read; 17 lags.
        for rank in ("17", "42"):
            await pilot.press("g", *rank, "enter")
        await wait_until(screen, lambda: cluster.focus.ranks == (0, 17, 42), "the ranks gone to in the focus")
        assert table.selected_pod == name(42, 0)
        for step in range(1, 21):
            cluster.logs.put_nowait(steps(cluster, 0, step, 2.0 + step, behind={17: 8} if step > 10 else {}))
        now[0] = T0 + 22.0
        await wait_until(screen, lambda: table.group.behind == ((17, 8),), "rank 17 behind the median")
        await shows(screen, "behind step 20: rank 17 -8")
        assert "logs of 3 of 512 ranks" in summary(screen)
        step = table.get_column_index("step")
        assert [table.get_row(name(r, 0))[step].plain for r in (0, 17, 42)] == ["20", "12", "20"]

        # Rank 300 is killed: a row and its log; then JobSet tears the 512 pods down and makes 512 new.
        cluster.pods.put_nowait(pod(300, 0, PodEventType.MODIFIED, PodPhase.FAILED, finished=T0 + 22.5,
                                    reason="Killed", exit_code=137))
        await wait_until(screen, lambda: table.group.failed == ((300, "Killed 137"),), "the failed rank")
        assert 300 in cluster.focus.ranks and name(300, 0) in table.keys
        cluster.logs.put_nowait([line(0, 0, 23.0, "event=checkpoint_saved step=20 reason=peer_failure "
                                      "file=x bytes=1 seconds=0.3 rank=0")])
        now[0] = T0 + 23.0  # the teardown, seen after the kill
        for rank in [300, *(r for r in range(RANKS) if r != 300)]:
            cluster.pods.put_nowait(pod(rank, 0, PodEventType.DELETED))
        for rank in range(RANKS):
            cluster.pods.put_nowait(pod(rank, 1))
        await wait_until(screen, lambda: table.group.attempt == 1 and table.group.size == RANKS, "the new group")
        cluster.logs.put_nowait([line(0, 1, 32.0, f"event=start rank=0 world={RANKS} pid=200 steps=99 restart=1"),
                                 line(0, 1, 32.5, "event=resumed from_step=20 restore_seconds=0.2 rank=0")])
        sent = {0}  # the ranks whose lines the new group's stream sent
        for step in range(21, 26):
            cluster.logs.put_nowait(batch := steps(cluster, 1, step, 12.0 + step))
            sent |= {line.rank for line in batch}
        now[0] = T0 + 38.0
        model = screen.timeline.model
        await wait_until(screen, lambda: model.restarts() and model.restarts()[0].recovered, "the recovery timed")
        (restart,) = model.restarts()
        told = [m.what for m in restart.moments]
        assert told[0] == "failure seen: pod 300-a0xyz (rank 300) Killed, exit 137 (SIGKILL)"
        assert "group torn down (512 pods)" in told and "512 new pods running" in told
        assert "checkpoint loaded: resumed from step 20" in told and restart.steps_lost == 0
        assert restart.recovery_seconds == 33.0 - 22.5  # the kill to the first step again
        report = model.goodput_report(now[0])
        assert report.restarts == 1 and report.steps_kept == 25
        # the killed pod and the first torn down are history rows; the 509 after them are not
        history = {key for key in table.keys if table.is_history(key)}
        assert history == {name(300, 0), name(0, 0), name(1, 0)} and HISTORY_PER_ATTEMPT == 3
        assert len(table.keys) <= MAX_FOLLOWED + HISTORY_PER_ATTEMPT and len(cluster.focus.ranks) <= MAX_FOLLOWED

        # Rank 211 stops in step 26; every other rank blocks in its collective and says it waits.
        # The ranks read all wait: the one that stopped is among the 509 others, whose last lines
        # are read once and name it; its row and its log follow.
        read = tuple(sorted(sent))
        cluster.logs.put_nowait([line(r, 1, 45.0, f"event=waiting step=26 seconds=8 rank={r} world={RANKS}")
                                 for r in read])
        cluster.tails = [line(r, 1, 45.0, f"event=waiting step=26 seconds=8 rank={r} world={RANKS}")
                         if r != 211 else line(r, 1, 36.0, f"step=24 loss=0.5 rank={r} world={RANKS}")
                         for r in range(RANKS) if r not in read]
        now[0] = T0 + 37.0 + 30.0
        await shows(screen, "hang: rank 211 stopped after step 25")
        assert sorted(cluster.asked) == sorted(set(range(RANKS)) - set(read))  # once, the unread ones
        await wait_until(screen, lambda: 211 in cluster.focus.ranks and name(211, 1) in table.keys,
                         "the stopped rank's row and log")


def test_a_group_summary_names_what_is_known_and_the_ranks_worth_a_row():
    """Pure: phases from every pod, steps only of the ranks read, the telling ranks first."""
    from tui.model.rank_group import ranks_to_show, summarize

    pods = {p.pod.name: p.pod for p in (
        *(pod(rank, 1) for rank in range(6)),
        pod(6, 1, phase=PodPhase.PENDING, reason="Unschedulable"),
        pod(5, 1, PodEventType.MODIFIED, PodPhase.FAILED, reason="Error", exit_code=1),
        pod(0, 0, phase=PodPhase.RUNNING))}  # the last attempt's rank 0, still ending
    steps = {name(0, 1): 30, name(2, 1): 30, name(3, 1): 27, name(4, 1): 29}
    group = summarize(pods, steps, attempt=1)
    assert group.size == 7 and group.phases == (("Running", 5), ("Pending", 1), ("Failed", 1))
    assert group.read == 4 and group.median == 30 and group.behind == ((3, 3),)  # one step behind is not
    assert group.failed == ((5, "Error 1"),) and group.waiting == ((6, "Unschedulable"),) and group.ending == 1
    assert ranks_to_show(group, pinned=[2]) == [0, 2, 5, 3, 6]
    assert ranks_to_show(group, most=2) == [0, 5]
    told = "\n".join(text for text, _ in group.rows())
    assert "restarting: 1 pod of the last attempt still ending" in told
    assert "steps from the logs of 4 of 7 ranks" in told
