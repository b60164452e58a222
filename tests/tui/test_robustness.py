"""A backend error is a notification, never a crash; a lost controller shows and comes back."""

from __future__ import annotations

import asyncio
import os
import signal

from backend.local.embedded import Embedded
from backend.lesson.jobs import apply_runtime_and_volume, lesson_trainjob
from tests.tui.conftest import connected, make_app, wait_until


async def kill_and_wait(pid: int) -> None:
    """SIGKILL a process and wait for it to be gone (its pidfd becomes readable)."""
    fd = os.pidfd_open(pid)
    gone = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_reader(fd, lambda: gone.done() or gone.set_result(None))
    try:
        os.kill(pid, signal.SIGKILL)
        await asyncio.wait_for(gone, 60)
    finally:
        asyncio.get_running_loop().remove_reader(fd)
        os.close(fd)


def notes(app) -> list[tuple[str, str, str]]:
    return [(n.title, n.message, n.severity) for n in app._notifications]


async def test_an_unknown_volume_and_a_bad_snapshot_name_are_notifications(home):
    app = make_app(home)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await connected(screen)
        worker = screen.storage.load_volume("no-such-volume")
        await worker.wait()
        title, message, severity = notes(app)[-1]
        assert severity == "error" and "no-such-volume" in message and "not found" in message
        assert "\n" not in message

        await apply_runtime_and_volume(screen.session.cluster)
        await pilot.press("4")
        await wait_until(screen, lambda: screen.ckpt_panel.volume == "checkpoints", "the volume to show")
        await pilot.press("s")
        await pilot.press("backspace", *"Not A Name!", "enter")
        await wait_until(screen, lambda: any(s == "error" and "snapshot" in t for t, _, s in notes(app)),
                         "the refused snapshot name to be notified", timeout=60)
        assert app.is_running
        await pilot.press("n")  # and the cockpit still answers keys
        assert screen.checklist.step_id == "setup-2"


async def test_a_killed_controller_does_not_stop_the_cockpit_and_new_jobs_still_appear(home):
    app = make_app(home)
    async with app.run_test(size=(100, 30)):
        screen = app.screen
        await connected(screen)
        cluster = screen.session.cluster
        status = await Embedded(home).status()
        await kill_and_wait(status["pid"])
        await apply_runtime_and_volume(cluster)  # starts a new controller
        await cluster.apply(lesson_trainjob("after-crash", 1, 3, ckpt_every=5, step_delay=0.0))
        await wait_until(screen, lambda: screen.following.followed == "after-crash",
                         "the cockpit's watch to see a job applied after the crash")
        assert app.is_running
        assert (await Embedded(home).status())["pid"] != status["pid"]


async def test_a_lost_cluster_shows_disconnected_then_reconnects(home):
    """The controller dies and no new one can start (its state directory is a plain file): the
    job bar says disconnected and the cockpit keeps retrying; once the directory is back, it
    reconnects by itself."""
    app = make_app(home)
    app.NOTIFICATION_TIMEOUT = 600  # read after the fact: a loaded machine once took the 5 s a toast lasts
    state, away = home / "cluster", home / "cluster.away"
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await connected(screen)
        pid = (await Embedded(home).status())["pid"]
        state.rename(away)
        state.write_text("not a directory\n")
        try:
            await kill_and_wait(pid)
            await wait_until(screen, lambda: screen.job_bar.connection.startswith("retry"),
                             "the job bar to say the cluster is gone")
            assert any(t == "cluster unreachable" for t, _, _ in notes(app))
            await pilot.press("n")  # the cockpit still answers keys
            assert screen.checklist.step_id == "setup-2"
        finally:  # the state directory back, for the reconnection and for the fixture's `down`
            state.unlink()
            away.rename(state)
        await wait_until(screen, lambda: screen.job_bar.connection == "connected", "the reconnection")
        assert any("connected to the cluster again" in m for _, m, _ in notes(app))
