"""A straggler in the cockpit at 80x24: rank 2 of four computes at half the others' speed (its own
`compute=` on its step lines), so the job bar names it with its speed and the pods panel's row for
its pod says Straggler in place of Running (the table alone, drawn at once, below). Fed through the
screen's real watches from a scripted cluster. Detection itself is tests/backend/test_stragglers.py."""

from __future__ import annotations

from textual.app import App, ComposeResult

from backend.models import JobPhase, LogLine, Pod, PodEvent, PodEventType, PodPhase
from backend.stragglers import Straggler
from tests.tui.conftest import wait_until
from tests.tui.scripted import JOB, T0, scripted_app
from tui.model.rank_group import ranks_to_show, summarize
from tui.widgets.pods_table import PodsTable

RANKS = 4


def name(rank: int) -> str:
    return f"{JOB}-node-0-{rank}-a0xyz"


def steps(first: int, last: int, slow: int | None) -> list[LogLine]:
    lines = []
    for step in range(first, last + 1):
        for rank in range(RANKS):
            compute = 0.04 if rank == slow else 0.02
            wait = 0.002 + (0.04 if slow is not None else 0.02) - compute
            lines.append(LogLine.parsed(name(rank), rank, T0 + 1 + step * 0.05,
                                        f"step={step} loss=0.5 rank={rank} world={RANKS} "
                                        f"compute={compute:.6f} wait={wait:.6f}"))
    return lines


async def test_a_straggler_is_named_in_the_job_bar_and_its_row_at_80x24(home):
    app, cluster, now = scripted_app(home, nodes=RANKS)
    async with app.run_test(size=(80, 24)):
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB, "the cockpit to follow the job")
        for rank in range(RANKS):
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=Pod(
                name=name(rank), job=JOB, rank=rank, restart_attempt=0, phase=PodPhase.RUNNING,
                created=T0, started=T0 + 1)))
        cluster.logs.put_nowait([LogLine.parsed(name(r), r, T0 + 0.5, f"event=training_started step=0 rank={r} "
                                                f"world={RANKS}") for r in range(RANKS)] + steps(1, 30, None))
        now[0] = T0 + 3
        table = screen.pods_table
        await wait_until(screen, lambda: len(table.pods) == RANKS, "the four pods in the table")
        await wait_until(screen, lambda: screen.timeline.model.slow.windows >= 1, "a window judged")
        assert screen.job_bar.straggler is None and "SLOW" not in screen.job_bar.render().plain

        cluster.logs.put_nowait(steps(31, 70, slow=2))
        now[0] = T0 + 5
        await wait_until(screen, lambda: screen.job_bar.straggler is not None, "the straggler named")
        bar = screen.job_bar.render().plain
        assert len(bar) <= 80 and "SLOW rank 2 0.50x" in bar, bar
        assert list(table.stragglers) == [2]  # its row says so (drawn at a reader's rate: below)
        assert screen.job_bar.straggler.one_line() == (
            "straggler rank 2: 0.50x the group's speed, the group waits 48% of each step for it")
        # once the job has ended, nothing waits for it any more
        cluster.jobs.put_nowait(cluster.job.model_copy(update={"phase": JobPhase.COMPLETE, "finished": T0 + 6}))
        await wait_until(screen, lambda: screen.job_bar.straggler is None, "the straggler let go at the job's end")
        assert table.stragglers == {}


class TableApp(App):
    def compose(self) -> ComposeResult:
        yield PodsTable(clock=lambda: 100.0, redraw_seconds=0)  # every change drawn at once


async def test_a_stragglers_row_says_so_in_place_of_its_phase_and_its_speed_as_its_reason():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(PodsTable)
        table.reset(JOB)
        for rank in range(RANKS):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=Pod(name=name(rank), job=JOB, rank=rank,
                                                                    restart_attempt=0, phase=PodPhase.RUNNING,
                                                                    created=50.0)))
        table.show_stragglers((Straggler(rank=2, speed=0.5, group_wait=0.48, steps=(26, 45)),))
        await pilot.pause()
        phase, reason = table.shown_columns.index("phase"), table.shown_columns.index("reason")
        assert [table.get_row(name(r))[phase].plain for r in range(RANKS)] == ["Running"] * 2 + ["Straggler", "Running"]
        assert table.get_row(name(2))[reason].plain == "speed 0.50"
        table.show_stragglers(())
        await pilot.pause()
        assert table.get_row(name(2))[phase].plain == "Running"


def test_a_large_groups_summary_names_its_straggler_and_gives_it_a_row():
    pods = {name(r): Pod(name=name(r), job=JOB, rank=r, restart_attempt=0, phase=PodPhase.RUNNING, created=50.0)
            for r in range(40)}
    slow = (Straggler(rank=17, speed=0.55, group_wait=0.4, steps=(26, 45)),
            Straggler(rank=30, speed=0.65, group_wait=0.2, steps=(26, 45)))
    group = summarize(pods, {}, attempt=0, stragglers=slow)
    assert ("straggler rank 17: 0.55x the group's speed, the group waits 40% of each step for it (and 1 other)",
            "bold $warning") in group.rows()
    assert ranks_to_show(group)[:3] == [0, 17, 30]
