"""Step 3 for real: two torchrun processes, their log kept in the workspace, and a verify that
reads that log — and fails, naming the step, when the log says the ranks disagree."""

from __future__ import annotations

import os
import re
import select
import shutil

import pytest

from backend.lesson.engine import Lesson
from backend.lesson.progress import StepStatus
from backend.settings import Settings
from training.logfmt import parse_line


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """One real run of step 3, shared: (settings, updates)."""
    settings = Settings(home=tmp_path_factory.mktemp("home"))
    lesson = Lesson(None, settings)

    async def collect():
        return [u async for u in lesson.run("3")]

    import asyncio

    return settings, asyncio.run(collect())


def _copy_workspace(settings: Settings, home) -> Settings:
    copy = Settings(home=home)
    shutil.copytree(settings.workspace, copy.workspace)
    return copy


def test_two_processes_print_the_same_loss_and_the_log_is_kept(ddp_run):
    settings, updates = ddp_run
    assert updates[-1].kind == "evidence" and all(u.kind == "line" for u in updates[:-1])
    evidence = updates[-1].evidence
    assert evidence.ok, evidence
    assert evidence.seen == "rank 0 and rank 1 printed the same loss at all 40 steps"
    assert any(re.fullmatch(r"2 processes \(pids \d+, \d+\)", d) for d in evidence.details)
    log = settings.workspace / "runs" / "step-3" / "ddp.log"
    streamed = [u.text for u in updates if u.kind == "line" and "loss=" in u.text]
    assert streamed and all(text in log.read_text() for text in streamed)
    assert Lesson(None, settings).state("3").status is StepStatus.DONE


async def test_verify_fails_when_the_log_shows_different_losses(ddp_run, tmp_path):
    settings = _copy_workspace(ddp_run[0], tmp_path / "home")
    log = settings.workspace / "runs" / "step-3" / "ddp.log"
    lines = log.read_text().splitlines()
    for i, text in enumerate(lines):  # change rank 1's loss at step 7 only
        fields = parse_line(text)
        if fields.get("step") == "7" and fields.get("rank") == "1" and "loss" in fields:
            lines[i] = text.replace(f"loss={fields['loss']}", "loss=9.999999")
    log.write_text("\n".join(lines) + "\n")
    evidence = await Lesson(None, settings).verify("3")
    assert not evidence.ok
    assert re.fullmatch(r"at step 7 rank 0 printed loss \d+\.\d{6} but rank 1 printed 9\.999999",
                        evidence.seen), evidence.seen
    assert Lesson(None, settings).state("3").status is StepStatus.FAILED


async def test_verify_fails_when_a_rank_stopped_early(ddp_run, tmp_path):
    settings = _copy_workspace(ddp_run[0], tmp_path / "home")
    log = settings.workspace / "runs" / "step-3" / "ddp.log"
    kept = [t for t in log.read_text().splitlines()
            if not (parse_line(t).get("rank") == "1" and int(parse_line(t).get("step", "0")) > 30)]
    log.write_text("\n".join(kept) + "\n")
    evidence = await Lesson(None, settings).verify("3")
    assert not evidence.ok and evidence.seen == "rank 1 printed no loss at step 31 (and 9 more steps)"


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
