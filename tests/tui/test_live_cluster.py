"""The cockpit on the real embedded cluster: real TrainJobs, real worker processes, real kills."""

from __future__ import annotations

import time

from textual.widgets import Input

from backend.lesson import resume_step
from backend.lesson.jobs import apply_runtime_and_volume, lesson_trainjob
from backend.lesson.progress import ProgressStore, StepState, StepStatus
from backend.models import Evidence
from tests.tui.conftest import connected, make_app, pods_of, wait_until
from tui.screens.confirm import ConfirmScreen


async def start_job(screen, name: str, steps: int, step_delay: float) -> None:
    cluster = screen.session.cluster
    await apply_runtime_and_volume(cluster)
    await cluster.apply(lesson_trainjob(name, 2, steps, ckpt_every=5, step_delay=step_delay))


async def test_step_6_waits_for_the_learners_kill_and_everything_shows_it_at_once(home, monkeypatch):
    # A learner gets ~60 s (300 steps) to kill a worker; this one kills at once, and 60 steps
    # (~12 s) still leave it time to kill mid-run and the group time to resume.
    monkeypatch.setattr(resume_step, "INTERACTIVE_STEPS", 60)
    app = make_app(home)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await connected(screen)
        # Step 6 needs step 5 (not buildable here yet): record it done, as the engine would.
        ProgressStore(app.settings.workspace).put("5", StepState(
            status=StepStatus.DONE, updated=time.time(),
            evidence=Evidence(ok=True, checked="prepared by the test", seen="done", at=time.time())))
        screen.checklist.select_step("6")
        screen.checklist.focus()
        await pilot.press("enter")
        await wait_until(screen, lambda: screen.checklist.status.get("6") == "running", "step 6 to start")
        await wait_until(screen, lambda: len(pods_of(screen, attempt=0, phase="Running")) == 2,
                         "two running worker pods of the step's job")
        job = screen.following.followed
        assert job is not None and job.startswith("lesson-resume-")
        assert screen.query_one("#pods-panel").border_title == f"pods · {job}"
        assert screen.panels.arrangement == "grid"
        # In the cockpit the kill is the learner's: the step asks for it and waits.
        output = screen.step_view._outputs
        await wait_until(screen, lambda: any("kill a worker now" in t for t in output.get("6", ())),
                         "the step to ask for the kill")
        assert pods_of(screen, attempt=1) == []
        await pilot.press("2")  # the pods panel takes the keys
        assert app.focused is screen.pods_table
        await pilot.press("down")  # ...so down moves the pod cursor, not the lesson
        assert screen.checklist.step_id == "6"
        killed = screen.pods_table.selected_pod
        await pilot.press("ctrl+k", "y")
        await wait_until(screen, lambda: len(pods_of(screen, attempt=1)) == 2,
                         "the restarted group (restart attempt 1)")
        for pod in pods_of(screen, attempt=1):
            assert screen.pods_table.get_row(pod.name)[2].plain == "1"  # the ATT column
        # the killed pod stays listed, failed, below the new group
        await wait_until(screen, lambda: screen.pods_table.is_history(killed), "the killed pod's row as history")
        assert screen.pods_table.pods[killed].phase.value == "Failed"
        assert screen.pods_table.get_row_index(killed) >= 2
        # the logs mark the kill and the restart; the timeline tells the recovery with its seconds
        await wait_until(screen, lambda: any("event=resumed" in s for s in screen.log_view.buffer),
                         "the resumed line")
        lines = list(screen.log_view.buffer)
        assert any(s.startswith("────") and "✘" in s for s in lines)
        assert any(s.startswith("────") and "restart attempt 1" in s for s in lines)
        await wait_until(screen, lambda: any(r.recovered for r in screen.timeline.model.restarts()),
                         "the timeline to show the recovery")
        restart = screen.timeline.model.restarts()[0]
        assert restart.recovery_seconds > 0 and restart.steps_lost is not None
        assert [m.kind for m in restart.moments][0] == "failure"
        await wait_until(screen, lambda: screen.checklist.status.get("6") in ("done", "failed"),
                         "step 6 to finish")
        assert screen.checklist.status["6"] == "done", screen.session.lesson.state("6").evidence
        assert screen.following.jobs[job].phase.value == "Complete"


async def test_ctrl_k_kills_the_selected_pod_and_the_restart_attempt_goes_to_1(home):
    app = make_app(home)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await connected(screen)
        await start_job(screen, "kill-me", steps=2000, step_delay=0.1)
        await wait_until(screen, lambda: screen.following.followed == "kill-me", "the cockpit to follow the new job")
        await wait_until(screen, lambda: len(pods_of(screen, attempt=0, phase="Running")) == 2,
                         "two running workers")
        await pilot.press("2")  # the pods tab
        selected = screen.pods_table.selected_pod
        await pilot.press("/")  # the logs tab, its filter box has focus: the pods are hidden
        assert isinstance(app.focused, Input)
        await pilot.press("ctrl+k")  # never kills a pod nobody sees: shows the pods first
        assert not isinstance(app.screen, ConfirmScreen)
        assert screen.panels.is_shown("pods") and app.focused is screen.pods_table
        await pilot.press("ctrl+k")
        assert isinstance(app.screen, ConfirmScreen)
        assert selected in str(app.screen.query_one("#question").render())
        await pilot.press("y")
        await wait_until(screen, lambda: len(pods_of(screen, attempt=1, phase="Running")) == 2,
                         "the group to come back as restart attempt 1")
        assert screen.pods_table.is_history(selected)  # kept, failed, dimmed
        assert [screen.pods_table.get_row(p.name)[2].plain for p in pods_of(screen, attempt=1)] == ["1", "1"]
        assert screen.following.jobs["kill-me"].restart_attempt == 1
        table = screen.pods_table  # on screen: CPU and MEM fill in from metrics.k8s.io

        def usage(name: str) -> list[str]:
            return [table.get_row(name)[table.get_column_index(k)].plain for k in ("cpu", "mem")]

        await wait_until(screen, lambda: all("-" not in usage(p.name)
                                             for p in pods_of(screen, attempt=1, phase="Running")),
                         "the new workers' CPU and memory")
        assert usage(selected) == ["-", "-"]  # the killed pod uses nothing
        await screen.session.cluster.delete("TrainJob", "kill-me")


async def test_logs_merge_ranks_filter_by_text_and_pod_and_pause_when_scrolled_up(home):
    app = make_app(home)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await connected(screen)  # the tabs are mounted by then
        view = screen.log_view
        await start_job(screen, "logs-job", steps=3000, step_delay=0.05)
        await wait_until(screen, lambda: screen.following.followed == "logs-job", "the cockpit to follow the job")
        await wait_until(screen, lambda: sum(1 for s in view.buffer if "step=" in s and s.startswith("r1 ")) >= 20
                         and sum(1 for s in view.buffer if "step=" in s and s.startswith("r0 ")) >= 20,
                         "step lines from both ranks")
        await pilot.press("3")
        await wait_until(screen, lambda: len(view.log_widget.lines) > 40, "lines on screen")
        assert {line[:3] for line in view.log_widget.lines if "step=" in line} == {"r0 ", "r1 "}

        # by text: only lines with the text, from every rank
        await pilot.press("/", *"rank=1 ")
        shown = [line for line in view.log_widget.lines if not line.startswith("    ↪")]  # wrapped rows
        assert shown and all("rank=1 " in line for line in shown)
        assert view.keep.text == "rank=1 "
        await pilot.press("escape", "/", "backspace")  # focusing the box selects its text
        assert not view.keep.active
        assert len(view.log_widget.lines) > len(shown)

        # by pod: enter on a row of the pods table shows that pod's lines only
        await pilot.press("escape", "2")  # out of the filter box first: there "2" is text
        assert app.focused is screen.pods_table
        pod = screen.pods_table.selected_pod
        await pilot.press("enter")
        assert screen.panels.active == "logs"
        assert view.keep.pod == pod
        rank = screen.pods_table.pods[pod].rank
        assert all(line.startswith((f"r{rank} ", "    ↪")) for line in view.log_widget.lines)

        # scrolling up pauses following and counts what arrives meanwhile; f follows again
        view.log_widget.focus()
        await pilot.press("home")
        assert view.follow is False
        await wait_until(screen, lambda: view.unseen > 0, "new lines to arrive while paused")
        assert "new lines" in view.border_subtitle
        await pilot.press("f")
        assert view.follow is True and view.unseen == 0
        assert view.log_widget.is_vertical_scroll_end
        await screen.session.cluster.delete("TrainJob", "logs-job")
