"""Every word a learner reads, whole (issue 45's done-when): at 80x24 and 120x40, with a job
running and a step running, every step's card and the top bar are walked; no field is cut mid-word.
Text wraps inside the card (a call to action, a reason, a link), the bars drop whole fields, and
only a name may lose its middle."""

from __future__ import annotations

import pytest
from rich.cells import cell_len
from textual.geometry import Region

from backend.models import LogLine, Pod, PodEvent, PodEventType, PodPhase
from tests.tui.conftest import wait_until
from tests.tui.scripted import JOB, T0, scripted_app

CALL = ("kill a worker now: ctrl+k on a pod in the pods panel, or from another terminal `kubectl delete "
        "pod gp-job-node-0-1-abcde`; the job trains for about 60 s, then this step checks it")
CARD_TEXTS = ("#step-heading", "#step-latest", "#step-done-when", "#step-keys", "#step-why", "#step-doc",
              "#step-evidence", "#step-note-prompt")


def drawn(widget) -> str:
    """What the widget draws at its size, every row, its spaces left out."""
    strips = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
    return "".join("".join(strip.text.split()) for strip in strips)


def written(widget) -> str:
    return "".join(str(widget.render()).split())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_every_steps_card_and_the_top_bar_read_whole(home, size):
    app, cluster, now = scripted_app(home)
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB and cluster.streams == 1, "the job")
        for rank in (0, 1):
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=Pod(
                name=f"{JOB}-node-0-{rank}-abcde", job=JOB, rank=rank, restart_attempt=1, phase=PodPhase.RUNNING,
                created=T0, started=T0 + 1)))
        cluster.logs.put_nowait([LogLine(f"{JOB}-node-0-0-abcde", 0, T0 + 2, "event=start rank=0 world=2 pid=1 "
                                         "steps=300 restart=1")]
                                + [LogLine.parsed(f"{JOB}-node-0-{r}-abcde", r, T0 + 2 + s / 10,
                                                  f"step={s} loss={1 / s:.6f} rank={r} world=2")
                                   for s in range(1, 60) for r in (0, 1)])
        await wait_until(screen, lambda: len(screen.pods_table.pods) == 2, "the pods")
        now[0] = T0 + 20
        bar = screen.job_bar
        bar.running_step, bar.running_for = "step 6", 72.0
        view = screen.step_view
        for step in screen.session.lesson.steps:
            screen.checklist.select_step(step.id)  # its card is under the checklist, at every size
            await pilot.pause()
            view.show(step, None, "", running=True)
            view.add_output(step.id, CALL)
            await pilot.pause()
            assert view.border_title == step.label and not view.border_subtitle
            for selector in CARD_TEXTS:
                widget = view.query_one(selector)
                if not widget.display:
                    continue
                assert widget.region.right <= view.region.right - 1, (step.id, selector)
                assert drawn(widget) == written(widget), (step.id, selector, drawn(widget), written(widget))
            assert "".join(CALL.split()) in drawn(view.query_one("#step-latest"))  # the call to action, whole
            # the top bar: within the line, its ends whole, an ellipsis only in the job's name
            shown = bar.render().plain
            assert cell_len(shown) <= bar.size.width and shown.endswith("running step 6 · 1m12s"), shown
            assert "…" not in shown.replace(JOB, ""), shown
            # the checklist names every step whole
            for index in range(screen.checklist.option_count):
                prompt = screen.checklist.get_option_at_index(index).prompt
                assert cell_len(prompt.plain) <= screen.checklist.scrollable_content_region.width, prompt.plain
