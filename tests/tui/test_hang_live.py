"""A hung group in the cockpit: the followed job's rank 1 stops inside a step while rank 0 waits on
it, both pods Running (what kubectl shows as healthy). Fed through the screen's real watches from a
scripted cluster, the job bar and the failure timeline say which rank stopped, at which step and
for how long against its usual step; F freezes and thaws a pod (where the cluster can), R
restarts the group (every running pod of its newest attempt deleted, asked first). Hang detection
itself is tests/backend/test_hangs.py."""

from __future__ import annotations

from backend.models import LogLine, Pod, PodEvent, PodEventType, PodPhase
from tests.tui.conftest import wait_until
from tests.tui.scripted import JOB, T0, scripted_app


def name(rank: int) -> str:
    return f"{JOB}-node-0-{rank}-a0xyz"


def line(rank: int, at: float, text: str) -> LogLine:
    return LogLine.parsed(name(rank), rank, T0 + at, text)


async def test_a_hung_rank_is_named_in_the_job_bar_and_the_timeline_and_a_key_restarts_its_group(home):
    app, cluster, now = scripted_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB, "the cockpit to follow the job")
        for rank in (0, 1):
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=Pod(
                name=name(rank), job=JOB, rank=rank, restart_attempt=0, phase=PodPhase.RUNNING,
                created=T0, started=T0 + 1)))
        # one step a second up to step 20; rank 1 then stops in step 21 and rank 0 says it waits
        cluster.logs.put_nowait([line(r, 0.5, f"event=start rank={r} world=2 pid={r + 10} steps=99 restart=0")
                                 for r in (0, 1)]
                                + [line(r, 1.0 + s, f"step={s} loss=0.5 rank={r} world=2")
                                 for s in range(1, 21) for r in (0, 1)]
                                + [line(0, 30.0, "event=waiting step=21 seconds=9 rank=0 world=2")])
        now[0] = T0 + 21.5
        await wait_until(screen, lambda: len(screen.pods_table.pods) == 2, "both pods in the table")
        assert screen.job_bar.hang is None  # stepping: no hang yet
        await wait_until(screen, lambda: screen.job_bar.goodput is not None, "the goodput so far")
        bar = screen.job_bar.render().plain
        # progress from the start line's steps=99, the time left at the mean step (1 s)
        assert "step 20/99 ~1m19s left" in bar, bar
        # F on rank 1's row freezes it (the scripted cluster records the ask), F again thaws it
        table = screen.pods_table
        table.move_cursor(row=table.get_row_index(name(1)))
        await pilot.press("F")
        await wait_until(screen, lambda: cluster.frozen == [(name(1), True)], "rank 1's pod frozen")
        await pilot.press("F")
        await wait_until(screen, lambda: cluster.frozen[-1] == (name(1), False), "rank 1's pod thawed")
        now[0] = T0 + 35.0  # 14 s after rank 1's last step: over the 10 s floor (10 x a 1 s step)
        await wait_until(screen, lambda: screen.job_bar.hang is not None, "the hang called")
        bar = screen.job_bar.render().plain
        assert "HUNG rank 1 at step 20: 14s silent (step 1.0s)" in bar, bar
        told = screen.query_one("#timeline-hang").render().plain
        assert "hang: rank 1 stopped after step 20, silent 14s" in told and "its pod still runs" in told, told
        assert "rank 0 waiting on it" in told

        await pilot.press("R")
        await wait_until(screen, lambda: app.screen is not screen, "the restart to be asked first")
        assert cluster.killed == []
        await pilot.press("y")
        await wait_until(screen, lambda: sorted(cluster.killed) == [name(0), name(1)], "both pods deleted")
