"""A node lost while the group trains, in the cockpit, through real processes on the lesson's
cluster (two nodes, the node lifecycle's short timings; what the platform does is upstream's, as
tests/local/test_node_failure.py follows it): the rank on the lost node goes with it, its peer
fails on the lost peer, JobSet recreates the group on the node left. The group is silent for far
longer than the hang detector's floor, yet that silence has a reason the platform shows, so the
job bar never says HUNG: it names the restart (and the wait, while a pod waits for a node), then
shows steps again (issue 43: it used to say `HUNG ranks 0,1 at step 88: 37s silent` throughout)."""

from __future__ import annotations

from backend.lesson.jobs import apply_runtime_and_volume, fresh_name, lesson_trainjob
from backend.local.embedded import Embedded
from tests.tui.conftest import connected, make_app, wait_until

LOSE_AT = 12


async def test_a_lost_node_is_named_in_the_job_bar_never_a_hang_and_the_steps_come_back(home):
    app = make_app(home)
    async with app.run_test(size=(200, 45)):
        screen = app.screen
        bar = screen.job_bar
        await connected(screen)
        cluster = screen.session.cluster
        await apply_runtime_and_volume(cluster)
        name = fresh_name("lost")
        await cluster.apply(lesson_trainjob(name, 2, 60, ckpt_every=5, step_delay=0.1))
        await wait_until(screen, lambda: screen.following.followed == name, "the cockpit to follow the job")
        table = screen.pods_table
        await wait_until(screen, lambda: bar._progress[0] is not None and bar._progress[0] >= LOSE_AT
                         and len({p.node for p in table.pods.values()}) == 2, f"step {LOSE_AT} on two nodes")
        seen: dict[str, list] = {"hang": [], "silence": []}

        def record(_: str) -> None:
            if bar.hang is not None:
                seen["hang"].append(bar.hang)
            if bar.silence and bar.silence not in seen["silence"]:
                seen["silence"].append(bar.silence)

        screen.changed.subscribe(bar, record)  # its own subscriber: wait_until unsubscribes the screen
        lost = next(p.node for p in table.pods.values() if p.rank == 1)
        assert (await Embedded(home).fail_node(lost)).startswith(f"node {lost} failed")
        await wait_until(screen, lambda: table.latest_attempt >= 1, "the new group", timeout=120)
        await wait_until(screen, lambda: any(s.startswith("restarting") for s in seen["silence"]),
                         "the restart named in the job bar", timeout=120)
        newest = table.latest_attempt

        def stepping_again() -> bool:
            pods = [p for p in table.pods.values() if p.restart_attempt == newest]
            return bar.silence is None and bool(pods) and all(
                table.steps.get(p.name, (0,))[0] > LOSE_AT - 5 for p in pods)

        await wait_until(screen, stepping_again, "the new group's steps", timeout=180)
        screen.changed.unsubscribe(bar)
        assert seen["hang"] == [], seen
        # e.g. `restarting: pod 0-plr8r (rank 0) Error, exit 143 (SIGTERM), the group is torn down`,
        # `restarting after kfcockpit-worker was lost: the group is torn down`, then `…: rendezvous
        # and checkpoint load` (measured)
        assert all(s.startswith(("restarting", "waiting for a node")) for s in seen["silence"]), seen
        assert any(f"after {lost} was lost" in s for s in seen["silence"]), seen
        assert "HUNG" not in bar.render().plain
