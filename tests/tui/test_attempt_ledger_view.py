"""The attempt ledger in the failure timeline's zoom (issue 47 part 2), at 80x24 on a scripted
cluster that keeps what a platform keeps after three restarts (tests/backend/test_ledger.py: a pod
deleted, a node lost, a rank OOMKilled): one entry per attempt with its times and why it ended,
whole; the restarts against the budget; enter (in the footer) shows the chosen attempt's logs:
its pods', the previous container's where one restarted in place (`kubectl logs -p`), and for a
pod deleted since, why there is none. The workers' lines are not read again for it."""

from __future__ import annotations

import re

from backend.models import LogLine
from tests.backend.test_ledger import JOB, T0, three_restarts
from tests.tui.conftest import wait_until
from tests.tui.scripted import scripted_app

# the first step of each group, as the run's record on the volume has them
RECORDS = [(T0 + start, f"event=start rank=0 world=2 pid={100 * attempt + 1} steps=300 restart={attempt}")
           for attempt, start in enumerate((3, 25, 53, 83))]
RECORDS += [(T0 + start + 1, f"step={step} loss=0.5 rank=0 world=2") for start, step in ((3, 1), (25, 11), (53, 21),
                                                                                             (83, 31))]


def scripted(home):
    app, cluster, _now = scripted_app(home)
    summary, pods, events, _groups = three_restarts()
    cluster.job = summary.model_copy(update={"run_dirs": [("checkpoints", JOB)]})
    cluster.records = RECORDS
    restarted = pods[1].model_copy(update={"restarts": 1})  # rank 1's container restarted in place
    cluster.listed = [pods[0], restarted, pods[2]]
    cluster.listed_events = events
    line = lambda pod, rank, at, text: LogLine.parsed(pod, rank, T0 + at, text)  # noqa: E731
    cluster.pod_logs = {
        (pods[0].name, False): [line(pods[0].name, 0, 84, "step=31 loss=0.5 rank=0 world=2")],
        (restarted.name, False): [line(restarted.name, 1, 90, "step=32 loss=0.5 rank=1 world=2")],
        (restarted.name, True): [line(restarted.name, 1, 86, "[bold]RuntimeError[/]: CUDA error rank=1")],
        (pods[2].name, False): [line(pods[2].name, 0, 69, "step=40 loss=0.4 rank=0 world=2")],
    }
    return app, cluster


QUICK = 30.0  # a scripted cluster answers at once: a guard against a hang only


def footer_text(screen) -> str:
    return [strip.text for strip in screen._compositor.render_strips()][-1]


def rows_of(option_list) -> list[str]:
    return [" ".join(str(option_list.get_option_at_index(i).prompt).split()) for i in range(option_list.option_count)]


async def test_the_timelines_zoom_lists_the_attempts_and_shows_a_chosen_attempts_logs_at_80x24(home):
    app, cluster = scripted(home)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB and screen.panels_ready, "the job", QUICK)
        # every group's first step, from the run's record, as the cockpit folds in a job's history
        await wait_until(screen, lambda: any(a.first_step == 31 for a in screen.timeline.model.goodput.attempts),
                         "the job's history", QUICK)
        streams = cluster.streams
        ledger = screen.query_one("#attempt-ledger")
        assert not ledger.display  # not in the timeline's tab: only in its zoom
        await pilot.press("6", "z")
        await wait_until(screen, lambda: ledger.ledger is not None and len(ledger.ledger.rows) == 4, "the ledger",
                         QUICK)
        await pilot.pause()
        assert screen.panels.zoomed == "timeline" and ledger.display and ledger.region.width > 70
        attempts = ledger.query_one("#ledger-attempts")
        assert app.focused is attempts
        rows = rows_of(attempts)
        assert rows[0].startswith("attempt 0 start +0.0s first step 1 at +4.0s end +22.0s")
        assert rows[0].endswith(f"rank 1 deleted: pod {JOB}-node-0-1-bbbbb on w2 (kubectl delete, a kill, or R)")
        assert rows[1].endswith("node w2 lost (NotReady): its ranks' pods went with it")
        assert rows[2].endswith(f"rank 0 failed: pod {JOB}-node-0-0-eeeee on w1, exit 137 (SIGKILL), OOMKilled")
        assert rows[3].startswith("attempt 3 start +80.0s first step 31 at +84.0s end -"), rows[3]
        assert rows[3].endswith("running")
        budget = " ".join(str(ledger.query_one("#ledger-budget").render()).split())
        assert "restarts 3 of 5 used (the JobSet's maxRestarts), 2 left" in budget, budget
        # every reason reads whole at 80 columns: the entry wraps, nothing is cut at the edge
        drawn = " ".join("".join(s.text for s in strip).strip() for strip in
                         attempts.render_lines(attempts.region.reset_offset))
        assert "OOMKilled" in drawn and "…" not in drawn, drawn
        assert "⏎ Attempt logs" in footer_text(screen)
        assert cluster.streams == streams  # the ledger took the lines the cockpit had

        # the newest attempt: its two pods, rank 1's previous container first
        await pilot.press("enter")
        await wait_until(screen, lambda: app.screen.id == "attempt-logs-screen", "the attempt's logs", QUICK)
        assert cluster.logs_read == [(f"{JOB}-node-0-0-ggggg", False), (f"{JOB}-node-0-1-hhhhh", True),
                                     (f"{JOB}-node-0-1-hhhhh", False)]
        shown = app.screen.query_one("#attempt-logs").lines
        text = "\n".join(shown)
        assert re.search(rf"pod {JOB}-node-0-1-hhhhh \(rank 1\) · previous container ─+\n"
                         r"\d\d:\d\d:\d\d \[bold\]RuntimeError\[/\]: CUDA error rank=1", text), text
        assert text.index("previous") < text.index("hhhhh (rank 1) · container now") < text.index("step=32")
        assert max(len(row) for row in shown) <= 80
        await pilot.press("escape")
        await wait_until(screen, lambda: app.screen is screen, "the cockpit again", QUICK)

        # the OOMKilled attempt: its failed pod's log is still there, the other pod is gone
        cluster.logs_read.clear()
        await pilot.press("up", "enter")
        await wait_until(screen, lambda: app.screen.id == "attempt-logs-screen", "attempt 2's logs", QUICK)
        text = "\n".join(app.screen.query_one("#attempt-logs").lines)
        assert "step=40 loss=0.4" in text
        assert f"pod {JOB}-node-0-1-fffff (rank 1)" in text and "the pod was deleted, and its log with it" in text
        assert cluster.logs_read == [(f"{JOB}-node-0-0-eeeee", False)]  # no restart in place: no previous
        assert "OOMKilled" in str(app.screen.query_one("#attempt-why").render())
        await pilot.press("escape")
        await wait_until(screen, lambda: app.screen is screen, "the cockpit again", QUICK)

        # the group restarts while the ledger is shown: read again, the new attempt at the end
        cluster.job = cluster.job.model_copy(update={"restart_attempt": 4})
        cluster.jobs.put_nowait(cluster.job)
        await wait_until(screen, lambda: len(ledger.ledger.rows) == 5, "the ledger after a restart", QUICK)
        assert rows_of(attempts)[4].endswith("running") and not rows_of(attempts)[3].endswith("running")

        await pilot.press("z")  # back from the zoom: the ledger goes, the keys stay in the timeline
        await pilot.pause()
        assert not ledger.display and screen.panels.panel_of(app.focused) == "timeline"
