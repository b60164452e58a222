"""The step card sits under the checklist and takes the rows the checklist leaves (issue 45: at
120x40 the card was 30x9 cells while the column under the checklist had ~20 empty rows). At 80x24,
where the lesson's steps would fill the column, the checklist scrolls so that the card still shows
its heading, done-when and keys; `1` shows the card whole."""

from __future__ import annotations

import pytest

from tests.tui.conftest import wait_until
from tests.tui.scripted import scripted_app


def below_the_checklist(screen) -> int:
    """The rows under the checklist in its column: the card's, all of them."""
    column = screen.query_one("#lesson-column").region
    return column.bottom - screen.checklist.region.bottom


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
async def test_the_card_takes_the_rows_under_the_checklist(home, size):
    app, _cluster, _now = scripted_app(home)
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and bool(screen.checklist.steps), "the checklist")
        for step in ("setup-1", "12", "6"):
            screen.checklist.select_step(step)
            for _ in range(3):  # the card is shown, laid out, then the checklist fitted to its head
                await pilot.pause()
            assert screen.step_view.step.id == step
            card, checklist = screen.step_view.region, screen.checklist.region
            assert card.x == checklist.x and card.width == checklist.width, (card, checklist)
            assert card.y == checklist.bottom and card.height == below_the_checklist(screen) > 0, step
            assert card.bottom == screen.query_one("#lesson-column").region.bottom, step
            view = screen.step_view
            head = [view.query_one(f"#step-{part}") for part in ("heading", "done-when", "keys")]
            for part in head:  # the head is on screen, whole: no row of it below the card
                assert part.region.height and part.region.bottom <= card.bottom - 1, (step, part.id)
            assert "v verify" in str(view.query_one("#step-keys").render())
            if size == (160, 45):
                # room for every step: the checklist keeps all its rows, the card has the rest
                assert checklist.height == screen.checklist.option_count + 2
                assert card.height == 45 - 2 - checklist.height
        if size == (160, 45):  # another step chosen while the pods fill the screen: the same rows after
            await pilot.press("2", "z")
            screen.checklist.select_step("12")
            for _ in range(3):
                await pilot.pause()
            await pilot.press("z")
            for _ in range(3):
                await pilot.pause()
            assert screen.checklist.region.height == screen.checklist.option_count + 2
        if size == (80, 24):
            await pilot.press("1")  # the card whole, in the body
            await pilot.pause()
            assert screen.panels.zoomed == "step" and screen.step_view.region.width == 80
            assert not screen.checklist.display


async def test_a_run_starting_at_80x24_leaves_the_card_at_its_head_with_the_call_to_action(home):
    """The card scrolled to its run-output box when a run began: in the few rows under the
    checklist that hid the heading and the line asking the learner to act."""
    app, _cluster, _now = scripted_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.panels_ready and bool(screen.checklist.steps), "the checklist")
        screen.checklist.select_step("6")
        await pilot.pause()
        screen.lesson._begin("6", "kill a worker now: ctrl+k on a pod in the pods panel")
        for _ in range(3):
            await pilot.pause()
        view = screen.step_view
        latest = view.query_one("#step-latest")
        assert view.scroll_y == 0 and latest.display
        assert view.region.y < latest.region.y and latest.region.bottom <= view.region.bottom - 1
        assert "kill a worker now" in str(latest.render())
        screen.lesson._end()
