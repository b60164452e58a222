"""The anatomy view (a) at 80x24 on a scripted cluster whose `explain` answers the lesson's
objects (tests/backend/anatomy_objects.py): the chain, the patch's diff and rank 1's pieces with
who put each there; escape goes back; a job the cluster cannot explain is one notification."""

from __future__ import annotations

import io
import re

from rich.console import Console

from backend.anatomy.build import anatomy_of
from backend.errors import NotFound
from tests.backend.anatomy_objects import lesson_objects
from tests.tui.conftest import wait_until
from tests.tui.scripted import scripted_app


def shown_text(widget) -> str:
    """What the widget draws, as plain text at its width."""
    console = Console(width=widget.content_region.width, file=io.StringIO(), record=True)
    console.print(widget.renderable if hasattr(widget, "renderable") else widget.content)
    return console.export_text()


async def test_the_anatomy_view_at_80x24(home):
    app, cluster, _now = scripted_app(home)
    asked = []

    async def explain(job: str, rank: int = 1):
        asked.append((job, rank))
        return anatomy_of(lesson_objects())

    cluster.explain = explain
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed is not None, "the cockpit to follow the job")
        await pilot.press("a")
        await wait_until(screen, lambda: app.screen.id == "anatomy-screen", "the anatomy view")
        assert asked == [(cluster.job.name, 1)]
        shown = shown_text(app.screen.query_one("#anatomy-text"))
        assert "pod lesson-ddp-node-0-1-ab1cd (rank 1)" in shown
        for by, piece in (("torch plugin", "env PET_MASTER_ADDR = lesson-ddp-node-0-0.lesson-ddp"),
                          ("kfcockpit.io/lesson", "volume checkpoints = claim checkpoints"),
                          ("scheduler", "node node = kfcockpit-worker2"),
                          ("process group", "torchrun turns PET_*")):
            words = r"\s+".join(map(re.escape, piece.split()))  # a long value wraps at a space
            assert re.search(rf"^{re.escape(by)} +{words}", shown, re.M), (by, shown)
        # the patch's diff: the field, then what it added
        assert re.search(r"^  replicatedJobs\[node\] pod.volumes\n  \+ \[\{\"name\":\"checkpoints\"", shown, re.M)
        assert max(len(line) for line in shown.splitlines()) <= 76  # inside the border and padding at 80
        # The first screenful, at 80 columns: the view's title and the chain from the TrainJob on.
        first = app.screen.query_one("#anatomy").region
        assert (first.width, first.height) == (80, 23)  # all but the footer
        assert str(app.screen.query_one("#anatomy").border_title).startswith("anatomy of lesson-ddp")
        await pilot.press("escape")
        await wait_until(screen, lambda: app.screen is screen, "the cockpit again")


async def test_a_job_that_cannot_be_explained_is_one_notification(home):
    app, cluster, _now = scripted_app(home)

    async def explain(job: str, rank: int = 1):
        raise NotFound(f"no TrainJob {job} in namespace default")

    cluster.explain = explain
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed is not None, "the cockpit to follow the job")
        notified = []
        app.notify = lambda message, **kw: notified.append((message, kw.get("title")))  # type: ignore[method-assign]
        screen.notify = app.notify  # type: ignore[method-assign]
        await pilot.press("a")
        await wait_until(screen, lambda: bool(notified), "the notification")
        job = cluster.job.name
        assert notified == [(f"no TrainJob {job} in namespace default", f"could not explain {job}")]
        assert app.screen is screen


def test_the_clusters_text_is_never_markup():
    from tests.backend.anatomy_objects import pod
    from tui.screens.anatomy import anatomy_renderable

    odd = pod(1)
    odd["metadata"]["labels"]["example.com/note"] = "[bold red]not markup[/]"
    anatomy = anatomy_of(lesson_objects(pods=(pod(0), odd)))
    console = Console(width=76, file=io.StringIO(), record=True)
    console.print(anatomy_renderable(anatomy))
    assert "label example.com/note = [bold red]not markup[/]" in console.export_text()
