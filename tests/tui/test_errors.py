"""What the cockpit does with errors and with keys pressed too early: a bug is logged and shown
whole while the cockpit goes on; a user error is one notification; a verify asked for before the
cluster has answered says so and leaves the saved progress alone. No cluster is needed here: the
connection is held back (or broken) on purpose."""

from __future__ import annotations

import asyncio

from backend.errors import Unavailable
from backend.lesson.engine import Lesson
from backend.models import Evidence
from backend.settings import Settings
from tests.tui.conftest import make_app, wait_until
from tui.launch import ERRORS_LOG


def notes(app) -> list[tuple[str, str, str]]:
    return [(n.title, n.message, n.severity) for n in app._notifications]


def hold_the_cluster(app) -> asyncio.Event:
    """The cluster does not answer until the returned event is set (never, in these tests)."""
    answer = asyncio.Event()
    open_cluster = app.session.open_cluster

    async def held() -> None:
        await answer.wait()
        await open_cluster()

    app.session.open_cluster = held
    return answer


async def test_v_before_the_cluster_answers_keeps_a_done_step_done(home):
    lesson = Lesson(None, Settings(home=home))
    lesson._record(lesson.step("6"), Evidence(ok=True, checked="the group resumed", seen="restart "
                                              "attempt 1 resumed from step 5 > 0"))
    saved = lesson.store.path.read_bytes()
    app = make_app(home)
    hold_the_cluster(app)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and bool(screen.checklist.steps),
                         "the checklist, before the cluster answers")
        published: list[str] = []
        screen.changed.subscribe(app, published.append, immediate=True)
        screen.checklist.select_step("6")
        await pilot.press("v")
        await wait_until(screen, lambda: "verified" in published, "the verify to finish")
        assert lesson.store.path.read_bytes() == saved
        assert screen.job_bar.connection == "connecting"
        assert any("still connecting" in m for _, m, _ in notes(app))
        assert screen.checklist.status["6"] == "done"
        await pilot.press("enter")  # running it is held back the same way
        await pilot.pause()
        assert screen.lesson.running_step is None
    assert lesson.store.path.read_bytes() == saved
    assert lesson.state("6").status.value == "done"


def failing_to_open_the_lesson(home, error: Exception):
    app = make_app(home)

    async def open_lesson() -> None:
        raise error

    app.session.open_lesson = open_lesson
    return app


async def test_a_bug_in_a_worker_is_logged_and_shown_whole_and_the_cockpit_goes_on(home):
    app = failing_to_open_the_lesson(home, KeyError("a bug in opening the lesson"))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: (home / ERRORS_LOG).exists(), "the bug to be logged")
        from tui.screens.error import ErrorScreen

        assert isinstance(app.screen, ErrorScreen)
        assert "KeyError: 'a bug in opening the lesson'" in app.screen.trace
        assert "in open_lesson" in app.screen.trace  # the whole traceback, not one line
        logged = (home / ERRORS_LOG).read_text()
        assert "connect" in logged.splitlines()[0] and "in open_lesson" in logged
        assert notes(app) == []  # a bug is not a toast
        await pilot.press("escape")
        assert app.screen is screen and app.is_running
        await pilot.press("question_mark")  # the cockpit still answers keys
        assert type(app.screen).__name__ == "HelpScreen"


async def test_a_user_error_in_a_worker_is_one_notification_not_a_dialog(home):
    app = failing_to_open_the_lesson(home, Unavailable("the workspace is on a disk that went away"))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready, "the panels")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert notes(app) == [("connect failed", "the workspace is on a disk that went away", "error")]
        assert app.screen is screen and not (home / ERRORS_LOG).exists()
