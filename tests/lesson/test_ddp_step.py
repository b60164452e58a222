"""Step 3 for real: stopped mid-run, both torchrun processes go; without a run, the verify says
how to make one. (A whole run, its kept log and the verify's failures on altered copies of it:
tests/lesson/test_lesson_in_cockpit.py, from the lesson run there.)"""

from __future__ import annotations

import os
import select

from backend.lesson.engine import Lesson
from backend.lesson.progress import StepStatus
from training.logfmt import parse_line


async def test_verify_without_a_run_says_how_to_do_it(settings):
    evidence = await Lesson(None, settings).verify("3")
    assert not evidence.ok and "no run yet" in evidence.seen and "lesson run 3" in evidence.seen


async def test_stopping_the_run_stops_both_workers(settings):
    lesson = Lesson(None, settings)
    run = lesson.run("3")
    pids: list[int] = []
    async for update in run:
        fields = parse_line(update.text)
        if fields.get("event") == "start":
            pids.append(int(fields["pid"]))
        if len(pids) == 2:
            break
    await run.aclose()  # what the TUI does when the learner cancels
    for pid in pids:  # a pidfd turns readable when the process has exited
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # already gone and reaped
        try:
            assert select.select([fd], [], [], 60)[0], f"worker {pid} still running"
        finally:
            os.close(fd)
    state = Lesson(None, settings).state("3")
    assert state.status is StepStatus.FAILED and "stopped before it finished" in state.evidence.seen
