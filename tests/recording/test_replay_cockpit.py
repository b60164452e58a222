"""The cockpit on the shipped step-6 recording, with no cluster at all (the embedded one is never
started: the session connects to the ReplayCluster): both ranks, the kill, the restart in the
failure timeline, the resumed step; ctrl+k and the other changes say it is a replay; the
playhead's keys work."""

from __future__ import annotations

from dataclasses import replace

from backend.recording.format import load
from tests.recording.replayed import KILL_AND_RESUME, replayed_app
from tests.tui.conftest import wait_until
from tui.config import CockpitConfig


def replay_app(tmp_path, position: float):
    return replayed_app(tmp_path / "home", position, config=CockpitConfig(confirm_kill=False))


async def test_the_step_6_replay_shows_both_ranks_the_kill_the_restart_and_the_resumed_step(tmp_path):
    app, replay = replay_app(tmp_path, position=load(KILL_AND_RESUME).ended)  # --from its end
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready, "the panels")
        table = screen.pods_table
        await wait_until(screen, lambda: screen.job_bar.goodput is not None and screen.job_bar.goodput.steps_kept == 40,
                         "the resumed group's last step in the job bar's goodput")
        assert screen.following.followed == "lesson-ddp"
        (restart,) = screen.timeline.model.restarts()
        assert restart.attempt == 0 and restart.steps_lost is not None and restart.recovery_seconds > 0
        kinds = [m.kind for m in restart.moments]
        assert "failure" in kinds and "resume" in kinds and restart.moments[-1].what.startswith(
            "first step trained again"), restart.moments
        assert {(p.rank, p.restart_attempt) for p in table.pods.values()} >= {(0, 0), (1, 0), (0, 1), (1, 1)}
        (killed,) = [p for p in table.pods.values() if p.restart_attempt == 0 and p.rank == 1]
        assert killed.reason == "Deleted" and table.is_history(killed.name)  # kill_pod: deleted, grace 0
        assert screen.job_bar.platform == "replay" and screen.job_bar.job.restart_attempt == 1

        screen.panels.show("pods")
        await pilot.press("ctrl+k")
        await pilot.press("x", "F")  # fail a node (in the nodes view only), freeze
        said = [n.message for n in app._notifications]
        assert said and all("a replay of kill-and-resume.kfrec.gz" in m for m in said[-2:]), said

        await pilot.press("P")
        assert replay.playhead.paused
        await pilot.press("less_than_sign")
        assert replay.playhead.speed == 0.5
        at = replay.playhead.position()
        await pilot.press("left_square_bracket")  # 10 s back: the panels play again from there
        assert replay.playhead.position() == at - 10 and replay.playhead.generation == 1


async def test_from_before_the_kill_the_replay_shows_the_first_group_only(tmp_path):
    recording = load(KILL_AND_RESUME)
    fifth = next(e.at for e in recording.streamed("stream_logs") if any(line.step == 5 for line in e.value))
    app, replay = replay_app(tmp_path, position=fifth)
    replay.playhead.toggle_pause()  # held there: nothing of the kill yet
    async with app.run_test(size=(160, 48)):
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and len(screen.pods_table.pods) == 2,
                         "the first group's two pods")
        assert {p.restart_attempt for p in screen.pods_table.pods.values()} == {0}
        assert not screen.timeline.model.restarts() and screen.job_bar.job.restart_attempt == 0


async def test_ctrl_r_records_the_followed_job_into_the_state_root(tmp_path):
    """On a cluster that is not a replay (here a replay's streams behind live-looking Capabilities:
    no cluster to start), ctrl+r records the followed job until it ends, as `kfcockpit record`."""
    original = load(KILL_AND_RESUME)
    app, replay = replay_app(tmp_path, position=original.ended)
    replay.capabilities = replace(replay.capabilities, read_only=None, playback=None)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and screen.following.followed == "lesson-ddp",
                         "the job followed")
        await pilot.press("ctrl+r")
        recordings = tmp_path / "home" / "recordings"
        await wait_until(screen, lambda: any(n.title == "recorded" for n in app._notifications), "the recording")
        (path,) = recordings.glob("lesson-ddp-*.kfrec.gz")
        again = load(path)
        assert again.how == "the job ended" and again.job == "lesson-ddp"
        lines = sorted(line.text for e in original.streamed("stream_logs") for line in e.value)
        assert sorted(line.text for e in again.streamed("stream_logs") for line in e.value) == lines
        assert [e.value for e in again.streamed("watch_jobs")][-1].restart_attempt == 1
