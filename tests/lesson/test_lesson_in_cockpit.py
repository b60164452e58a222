"""The whole lesson done in the cockpit, as a learner does it: every action step run with enter
from the checklist and followed to its verify, the notes written in the step card (setup 1, step
2, step 7's reading of its two runs, step 10), step 6's worker killed with ctrl+k in the pods
panel and the restart read in every panel. On the embedded cluster, for real: torchrun workers,
kfp.local pipelines, Ray Train, the restarted group's resume, snapshots, step 12's clean second
cluster.

One run of the lesson serves the whole suite: it stands for `kfcockpit lesson run --all` (the
same engine and steps; `kfcockpit lesson status` reads the cockpit's progress back), and the
evidence it leaves (step 3's log, step 1's pipeline record) is what the verifies' failure
reasons are tried on, altered in copies. A bug in a step never ends the cockpit: no error dialog
may appear, and the app still runs at the end.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.widgets import Select, TextArea

from backend.lesson import resume_step
from backend.lesson.engine import Lesson
from backend.lesson.progress import StepStatus
from backend.settings import Settings
from tests.lesson.conftest import kfcockpit, processes_under
from tests.tui.conftest import connected, make_app, pods_of, wait_until
from training.logfmt import parse_line
from tui.screens.confirm import ConfirmScreen

# Every step for real, Ray and a second (clean) cluster included: minutes, not seconds.
pytestmark = pytest.mark.timeout(1800)
STEP_SECONDS = 600.0  # a guard against a hang per step, not a speed goal: 2 shared cores

NOTES = {
    "setup-1": "Standalone Trainer and Kubeflow Pipelines on kind, with kubectl apply.",
    "2": "The Trainer launches the worker pods and gives each its rank; PyTorch DDP all-reduces the gradients.",
    "7": "Two workers took less wall time than one worker, for about the same final loss.",
    "10": "Trainer: a declared TrainJob, failure recovery by a group restart, owned by the platform team. "
          "Ray Train: a Python driver, owned by the ML team.",
}
ACTION_STEPS = ["setup-2", "setup-3", "1", "3", "4", "5", "6", "7", "8", "9", "11", "12"]
IN_ORDER = ["setup-1", "setup-2", "setup-3", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"]


async def go_to(pilot, screen, step_id: str) -> None:
    """n and p in the checklist, as a learner moves."""
    screen.checklist.focus()
    await pilot.pause()
    ids = [s.id for s in screen.checklist.steps]
    while screen.checklist.step_id != step_id:
        await pilot.press("n" if ids.index(step_id) > ids.index(screen.checklist.step_id) else "p")
    assert screen.step_view.step.id == step_id


async def write_note(pilot, screen, step_id: str, key: str) -> None:
    """Into the note (enter on a reading step, e on step 7), type under what is there, ctrl+s."""
    await pilot.press(key)
    note = screen.step_view.query_one("#step-note", TextArea)
    assert pilot.app.focused is note
    await pilot.press("enter", *NOTES[step_id])  # the cursor starts after what is written
    await pilot.press("ctrl+s")
    await wait_until(screen, lambda: screen.checklist.status.get(step_id) == "done",
                     f"{step_id}'s note to pass: {screen.session.lesson.state(step_id).evidence}", STEP_SECONDS)
    await pilot.press("escape")


async def finished(screen, step_id: str) -> None:
    """The run started (its first output line) and ended, with its verify's result shown."""
    await wait_until(screen, lambda: bool(output(screen, step_id)) and screen.lesson.running_step is None
                     and screen.checklist.status.get(step_id) in ("done", "failed"), f"step {step_id} to finish",
                     STEP_SECONDS)


def output(screen, step_id: str) -> list[str]:
    return list(screen.step_view._outputs.get(step_id, ()))


def unwrapped(rows) -> list[str]:
    """The log's lines as printed: a line wider than the panel is shown as rows, cut at a space."""
    lines: list[str] = []
    for row in rows:
        if row.startswith("    ↪ ") and lines:
            lines[-1] += " " + row.removeprefix("    ↪ ")
        else:
            lines.append(row)
    return lines


async def kill_a_worker_when_asked(pilot, screen) -> str:
    """Step 6 waits for the learner's kill: pick the pod in the pods panel, ctrl+k, confirm."""
    await wait_until(screen, lambda: any("kill a worker now" in t for t in output(screen, "6")),
                     "step 6 to ask for the kill", STEP_SECONDS)
    assert pods_of(screen, attempt=1) == []
    await pilot.press("z")  # the step card fills the body: the pods are out of sight…
    await pilot.press("ctrl+k")  # …so ctrl+k shows them first and kills nothing
    assert not isinstance(pilot.app.screen, ConfirmScreen) and screen.panels.is_shown("pods")
    assert pilot.app.focused is screen.pods_table
    await pilot.press("down")  # rank 1: the pods panel has the keys, not the checklist
    assert screen.checklist.step_id == "6"
    killed = screen.pods_table.selected_pod
    await pilot.press("ctrl+k")
    assert isinstance(pilot.app.screen, ConfirmScreen)
    assert killed in str(pilot.app.screen.query_one("#question").render())
    await pilot.press("y")
    return killed


async def the_restarted_group_in_every_panel(pilot, screen, killed: str) -> None:
    """While step 6's job trains on after the kill: the new group in the pods table (its CPU and
    memory from metrics.k8s.io, the killed pod's none), the merged logs of both ranks filtered
    by text and by pod, and paused while the learner scrolls up."""
    await wait_until(screen, lambda: len(pods_of(screen, attempt=1, phase="Running")) == 2,
                     "the group to come back as restart attempt 1")
    table = screen.pods_table
    assert [table.get_row(p.name)[2].plain for p in pods_of(screen, attempt=1)] == ["1", "1"]  # ATT

    def usage(name: str) -> list[str]:
        return [table.get_row(name)[table.get_column_index(k)].plain for k in ("cpu", "mem")]

    await wait_until(screen, lambda: all("-" not in usage(p.name) for p in pods_of(screen, attempt=1, phase="Running")),
                     "the new workers' CPU and memory")
    assert usage(killed) == ["-", "-"]  # the killed pod uses nothing
    view = screen.log_view
    await wait_until(screen, lambda: {line[:3] for line in view.log_widget.lines if "step=" in line} == {"r0 ", "r1 "},
                     "both ranks' step lines on screen")
    log = view.log_widget
    await wait_until(screen, lambda: len(log.lines) > log.size.height + 5, "more lines than the panel shows")
    log.focus()
    await pilot.press("home")  # scrolling up pauses following and counts what arrives meanwhile
    assert view.follow is False
    await wait_until(screen, lambda: view.unseen > 0, "new lines while paused")
    assert "new lines" in view.border_subtitle
    await pilot.press("f")
    assert view.follow is True and view.unseen == 0 and view.log_widget.is_vertical_scroll_end
    await pilot.press("/", *"rank=1 ")  # by text: only lines with it, from every rank
    # the kill's and the restart's marks show under every filter
    shown = [line for line in unwrapped(view.log_widget.lines) if not line.startswith("────")]
    assert shown and all("rank=1 " in line for line in shown) and view.keep.text == "rank=1 "
    await pilot.press("escape", "/", "backspace")  # focusing the box selects its text
    assert not view.keep.active and len(view.log_widget.lines) > len(shown)
    await pilot.press("escape", "2")  # out of the filter box (there "2" is text), into the pods
    assert pilot.app.focused is table
    pod = table.selected_pod
    await pilot.press("enter")  # by pod: enter on its row
    assert view.keep.pod == pod
    rank = table.pods[pod].rank
    others = [line for line in unwrapped(view.log_widget.lines) if not line.startswith((f"r{rank} ", "────"))]
    assert not others, (pod, rank, others[:5])
    view.query_one("#log-source", Select).clear()  # "all workers" again
    await pilot.pause()
    assert view.keep.pod is None


@dataclass
class Walked:
    settings: Settings
    outputs: dict[str, list[str]]  # each step's run output, as its card showed it
    status: dict[str, dict]  # `kfcockpit lesson status -o json` afterwards


async def walk(home: Path) -> dict[str, list[str]]:
    """The learner's way through the lesson, checking what the cockpit shows on the way."""
    bugs: list[str] = []
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        screen.changed.subscribe(app, lambda what: what == "bug" and bugs.append(what), immediate=True)
        await connected(screen)
        for step_id in IN_ORDER:
            await go_to(pilot, screen, step_id)
            if step_id in NOTES and step_id != "7":
                await write_note(pilot, screen, step_id, "enter")
                continue
            await pilot.press("enter")
            if step_id == "6":
                killed = await kill_a_worker_when_asked(pilot, screen)
                await the_restarted_group_in_every_panel(pilot, screen, killed)
            await finished(screen, step_id)
            assert not bugs, f"a bug in the cockpit during step {step_id}"
            if step_id == "7":  # the run quoted its two runs in the note; the reading is the learner's
                assert screen.checklist.status["7"] == "failed"
                assert "the side-by-side note" in screen.session.lesson.state("7").evidence.seen
                await write_note(pilot, screen, "7", "e")
            assert screen.checklist.status[step_id] == "done", (
                step_id, screen.session.lesson.state(step_id).evidence, output(screen, step_id)[-15:])
            assert not screen.step_view.query_one("#step-latest").display  # the run's last line went with the run
            # the followed job is one the cockpit's cluster has (step 12's ran on a clean one)
            assert "not on the cluster" not in screen.job_bar.render().plain, step_id
            if step_id == "3":  # two processes on this machine, no job: their curve still shows
                assert screen.loss_chart.series.get("step 3 run")
            if step_id == "6":
                job = screen.following.followed
                assert job.startswith("lesson-resume-") and screen.pods_table.is_history(killed)
                assert screen.pods_table.pods[killed].phase.value == "Failed"
                marks = [s for s in screen.log_view.buffer if s.startswith("────")]
                assert any("✘" in s for s in marks) and any("restart attempt 1" in s for s in marks)
                [restart] = screen.timeline.model.restarts()
                assert restart.recovered and restart.steps_lost is not None
                # done at the resume, its done-when: the paced job may still train
                assert "after the resume: done" in output(screen, "6")[-1]
                assert screen.following.jobs[job].phase.value in ("Running", "Complete")
        assert not bugs and app.is_running
        return {step_id: output(screen, step_id) for step_id in ACTION_STEPS}


@pytest.fixture(scope="module")
def walked(tmp_path_factory) -> Walked:
    home = tmp_path_factory.mktemp("cockpit-lesson") / "home"
    try:
        with pytest.MonkeyPatch.context() as patch:
            # A learner gets ~60 s (300 steps) to kill a worker; this one kills at once, and 100
            # steps (~20 s of mostly sleeping workers) leave the group time to resume while the
            # panels are read.
            patch.setattr(resume_step, "INTERACTIVE_STEPS", 100)
            outputs = asyncio.run(walk(home))
        status = {s["id"]: s for s in json.loads(kfcockpit("lesson", "status", "-o", "json", home=home).out)}
    finally:
        down = kfcockpit("cluster", "down", home=home)
    assert down.code == 0, down.err
    return Walked(Settings(home=home), outputs, status)


def test_every_step_is_done_in_the_cockpit_and_the_headless_lesson_sees_it(walked):
    assert {step: s["status"] for step, s in walked.status.items()} == dict.fromkeys(IN_ORDER, "done")
    assert all(walked.status[step]["has_note"] for step in NOTES)
    seen3 = walked.status["3"]["evidence"]["seen"]
    assert seen3 == "rank 0 and rank 1 printed the same loss at all 40 steps", seen3
    seen4 = walked.status["4"]["evidence"]["seen"]  # where each rank ran, on the lesson's two nodes
    assert re.search(r"\((rank 0 on node \S+, rank 1 on node \S+|both on node \S+)\)", seen4), seen4
    seen6 = walked.status["6"]["evidence"]["seen"]
    found = re.fullmatch(r"restart attempt (\d+) resumed from step (\d+) > 0", seen6)
    assert found and int(found.group(1)) >= 1 and int(found.group(2)) > 0, seen6
    assert any(" printed event=resumed from_step=" in d for d in walked.status["6"]["evidence"]["details"])


def test_nothing_is_left_running(walked):
    assert processes_under(walked.settings.home) == []


# ---------------------------------------------------------------- verifies that read the evidence
# The run above left the real evidence a verify reads; a copy of it, altered, must fail and say why.


def _copy_workspace(settings: Settings, home: Path) -> Settings:
    copy = Settings(home=home)
    shutil.copytree(settings.workspace, copy.workspace)
    return copy


def test_step_3_two_processes_printed_the_same_loss_and_the_log_is_kept(walked):
    evidence = Lesson(None, walked.settings).state("3").evidence
    assert any(re.fullmatch(r"2 processes \(pids \d+, \d+\)", d) for d in evidence.details)
    log = walked.settings.workspace / "runs" / "step-3" / "ddp.log"
    streamed = [text for text in walked.outputs["3"] if "loss=" in text]
    assert streamed and all(text in log.read_text() for text in streamed)


async def test_step_3_fails_when_the_log_shows_different_losses(walked, tmp_path):
    settings = _copy_workspace(walked.settings, tmp_path / "home")
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


async def test_step_3_fails_when_a_rank_stopped_early(walked, tmp_path):
    settings = _copy_workspace(walked.settings, tmp_path / "home")
    log = settings.workspace / "runs" / "step-3" / "ddp.log"
    kept = [t for t in log.read_text().splitlines()
            if not (parse_line(t).get("rank") == "1" and int(parse_line(t).get("step", "0")) > 30)]
    log.write_text("\n".join(kept) + "\n")
    evidence = await Lesson(None, settings).verify("3")
    assert not evidence.ok and evidence.seen == "rank 1 printed no loss at step 31 (and 9 more steps)"


async def test_step_1_fails_when_the_task_log_lacks_an_input(walked, tmp_path):
    assert "[print-inputs] input workers=2" in walked.outputs["1"]
    settings = _copy_workspace(walked.settings, tmp_path / "home")
    record = settings.workspace / "runs" / "step-1" / "pipeline-run.json"
    run = json.loads(record.read_text())
    task = next(t for t in run["tasks"] if t["name"] == "print-inputs")
    task["logs"] = [text for text in task["logs"] if "workers" not in text]
    record.write_text(json.dumps(run))
    evidence = await Lesson(None, settings).verify("1")
    assert not evidence.ok and evidence.seen == "the task log lacks input workers=2"


# ---------------------------------------------------------------- step 12's run, as the e2e suite reads one
# tests/e2e/test_pipelines.py checks the committed pipeline on a real cluster; on the embedded one
# step 12's run above is that pipeline, on a clean cluster, and serves it: one run of its two
# TrainJobs and its Ray Train task, not two.


def _warm_started(log: Path) -> float:
    """When the clean cluster's zygote began importing torch (epoch seconds), from controller.log's
    "warm workers ready (zygote pid P, imports took S s)" line and its local-time stamp."""
    for text in log.read_text().splitlines():
        found = re.match(r"(\S+ \S+),(\d+) .* warm workers ready \(zygote pid \d+, imports took ([\d.]+)s\)", text)
        if found:
            stamp = time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")) + int(found.group(2)) / 1000
            return stamp - float(found.group(3))
    raise AssertionError(f"no warm workers in {log}")


async def test_step_12s_committed_pipeline_trained_two_workers_and_left_checkpoints_snapshots_and_ray(walked):
    from backend.connect import connect
    from backend.lesson.definition_steps import CLEAN_HOME
    from backend.local.embedded import Embedded
    from backend.models import PodPhase
    from backend.pipelines.images import BASE_IMAGE
    from backend.pipelines.results import PipelineRunResult, TaskState

    run_dir = walked.settings.workspace / "runs" / "step-12"
    result = PipelineRunResult.model_validate_json((run_dir / "pipeline-run.json").read_text())
    assert result.ok and all(task.state == TaskState.SUCCEEDED for task in result.tasks), result.tasks
    train = result.task("train-job").outputs
    assert train["world_size"] == 2 and train["run"] == "ddp-2w"
    # the run warmed the workers as it began, not when its task applied the job
    clean = Embedded(run_dir / CLEAN_HOME)
    assert _warm_started(clean.layout.controller_log) < result.task("train-job").started
    # Two snapshots, compared side by side: the two-worker and the one-worker run.
    first, second = result.output("snapshot-volume"), result.output("snapshot-volume-2")
    rows = json.loads(result.output("compare-runs"))
    assert [(r["run"], r["world_size"], r["snapshot"]) for r in rows] == [
        ("ddp-2w", 2, first), ("ddp-1w", 1, second)]
    # Ray Train in its task: two workers, each reporting its metrics.
    ray = result.task("ray-train")
    assert ray.outputs["world_size"] == 2
    assert {line.split("rank=")[1].split()[0] for line in ray.logs
            if line.startswith("event=reported") and "rank=" in line} == {"0", "1"}
    # Progress arrived while the run went on: the workers' lines in the step's stream.
    assert any("step=40 loss=" in line and "rank=1" in line for line in walked.outputs["12"])

    await clean.up(warm=False)  # stopped after the step; read back without warm workers
    cluster = await asyncio.to_thread(connect, walked.settings.model_copy(update={"home": clean.layout.home}))
    try:
        pods = await cluster.list_pods(train["job"])  # two worker pods on the pinned image, both finished
        assert sorted(p.rank for p in pods) == [0, 1]
        assert all(p.phase == PodPhase.SUCCEEDED and p.image == BASE_IMAGE for p in pods)
        volume = result.task("create-volume").outputs["name"]  # read back by a reader pod, not the workers
        checkpoints = [c for c in await cluster.checkpoints(volume) if c.run == "ddp-2w"]
        assert [c.step for c in checkpoints if c.valid] == [30, 35, 40] and all(c.world_size == 2 for c in checkpoints)
        assert result.task("list-checkpoints").outputs["newest_step"] >= 40
        assert {first, second} <= {s.name for s in await cluster.snapshots()}
    finally:
        await cluster.close()
        await clean.down()
