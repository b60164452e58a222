"""Progress and notes live in the workspace and survive a new Lesson (a new process, a new SSH
session); reading steps pass only when the note covers what the step asks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from backend.lesson.engine import Lesson, LessonError
from backend.lesson.notes import covered_text
from backend.lesson.progress import StepState, StepStatus
from backend.models import Evidence

GOOD_SETUP_NOTE = """I will install Kubeflow standalone components with kustomize on a kind cluster:
only Kubeflow Trainer (v2.3) and Kubeflow Pipelines, no full platform."""

GOOD_STEP2_NOTE = """The Trainer launches the worker pods, gives each its rank, world size and the
master address, and restarts the group. PyTorch owns the process group and DDP's gradient
all-reduce, the training loop and the checkpoints."""


def test_notes_round_trip_through_a_new_lesson(settings):
    Lesson(None, settings).save_note("2", "first draft\nwith ünïcode\n")
    again = Lesson(None, settings)
    assert again.note("2") == "first draft\nwith ünïcode\n"
    assert again.note("step 2") == again.note("2")
    assert again.note("10") == ""
    note_file = settings.workspace / "notes" / "2.md"
    assert note_file.read_text(encoding="utf-8") == "first draft\nwith ünïcode\n"
    assert not [p for p in note_file.parent.iterdir() if p.name.startswith(".")]  # no temp left


async def test_reading_step_names_the_missing_topic(settings):
    lesson = Lesson(None, settings)
    empty = await lesson.verify("2")
    assert not empty.ok and "no note yet" in empty.seen
    lesson.save_note("2", "The Trainer launches the worker pods for the job.")
    partial = await lesson.verify("2")
    assert not partial.ok
    assert "what PyTorch does" in partial.seen and "how the workers find each other" in partial.seen
    assert "launching the workers" not in partial.seen
    lesson.save_note("2", GOOD_STEP2_NOTE)
    full = await lesson.verify("2")
    assert full.ok, full.seen
    assert Lesson(None, settings).state("2").status is StepStatus.DONE


async def test_setup_1_records_the_platform_and_ignores_template_placeholders(settings):
    lesson = Lesson(None, settings)
    lesson.save_note("setup-1", "Install method: <standalone, manifests or a distribution?>\n"
                                "Subprojects: <which Kubeflow projects: trainer? pipelines?>\n")
    assert not (await lesson.verify("setup-1")).ok
    lesson.save_note("setup-1", GOOD_SETUP_NOTE)
    evidence = await lesson.verify("setup-1")
    assert evidence.ok, evidence.seen
    assert any("embedded local cluster" in d for d in evidence.details)


async def test_reading_step_run_verifies_the_note(settings):
    lesson = Lesson(None, settings)
    lesson.save_note("setup-1", GOOD_SETUP_NOTE)
    updates = [u async for u in lesson.run("setup-1")]
    assert [u.kind for u in updates] == ["evidence"] and updates[0].evidence.ok


def test_progress_survives_a_new_lesson_and_reset(settings):
    first = Lesson(None, settings)
    first._record(first.step("3"), Evidence(ok=True, checked="c", seen="rank 0 and rank 1 agreed"))
    first._record(first.step("2"), Evidence(ok=False, checked="c", seen="missing: x"))
    second = Lesson(None, settings)
    assert second.state("3").status is StepStatus.DONE
    assert second.state("3").evidence.seen == "rank 0 and rank 1 agreed"
    assert second.state("2").status is StepStatus.FAILED
    second.save_note("2", "kept")
    second.reset("3")
    assert Lesson(None, settings).state("3").status is StepStatus.TODO
    assert Lesson(None, settings).state("2").status is StepStatus.FAILED
    second.reset()
    third = Lesson(None, settings)
    assert {s.status for s in third.states().values()} == {StepStatus.TODO}
    assert third.note("2") == "kept"  # reset never throws away what the learner wrote


def test_a_run_whose_process_died_shows_as_interrupted(settings):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lesson = Lesson(None, settings)
    lesson.store.put("3", StepState(status=StepStatus.RUNNING, updated=1.0, pid=dead.pid))
    state = Lesson(None, settings).state("3")
    assert state.status is StepStatus.FAILED and "interrupted" in state.evidence.seen


def test_unreadable_progress_is_set_aside_not_lost(settings):
    settings.workspace.mkdir(parents=True)
    (settings.workspace / "progress.json").write_text("{not json")
    assert Lesson(None, settings).state("3").status is StepStatus.TODO
    kept = list(settings.workspace.glob("progress.json.unreadable-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{not json"


def test_unknown_and_out_of_order_steps_say_what_to_do(settings):
    lesson = Lesson(None, settings)
    with pytest.raises(LessonError, match=r"unknown step '13'.*kfcockpit lesson list"):
        lesson.step("13")
    with pytest.raises(LessonError, match=r"^do step 4 first: .*\(kfcockpit lesson run 4\); step 5 needs it$"):
        lesson.run("5")
    lesson._record(lesson.step("6"), Evidence(ok=True, checked="c", seen="s"))
    with pytest.raises(LessonError, match=r"do step 8 first"):
        lesson.run("10")
    assert lesson.state("5").status is StepStatus.TODO  # nothing started


def test_progress_file_is_plain_json(settings):
    lesson = Lesson(None, settings)
    lesson._record(lesson.step("3"), Evidence(ok=True, checked="c", seen="s"))
    data = json.loads((settings.workspace / "progress.json").read_text())
    assert data["steps"]["3"]["status"] == "done" and data["steps"]["3"]["evidence"]["seen"] == "s"


async def test_an_untouched_draft_never_passes(settings):
    lesson = Lesson(None, settings)
    for step_id in ("setup-1", "2", "10"):
        text = await lesson.draft_note(step_id)
        assert text.strip() and not covered_text(text).strip(), step_id  # nothing counts yet
        lesson.save_note(step_id, text)
        assert not (await lesson.verify(step_id)).ok, step_id
        assert await lesson.draft_note(step_id) == text  # the saved note wins over the template
    assert "embedded local cluster" in await lesson.draft_note("setup-1")


async def test_text_typed_on_a_heading_line_counts_and_the_template_heading_does_not(settings):
    lesson = Lesson(None, settings)
    draft = await lesson.draft_note("setup-1")
    typed = (draft.replace("## Install method\n", "## Install method: standalone, kustomize on kind\n")
                  .replace("## Subprojects on the cluster\n",
                           "## Subprojects on the cluster - the Trainer and Kubeflow Pipelines\n"))
    assert covered_text(typed).split() == ["standalone,", "kustomize", "on", "kind", "the", "trainer",
                                           "and", "kubeflow", "pipelines"]
    lesson.save_note("setup-1", typed)
    evidence = await lesson.verify("setup-1")
    assert evidence.ok and evidence.seen.startswith("a 9-word note"), evidence.seen
    # A heading of the learner's own counts whole; the cockpit's record line counts not at all
    # (on kube it names the "Pipelines endpoint", which must not cover the Pipelines topic).
    assert covered_text("## Trainer and pipelines, standalone\n").split() == ["trainer", "and", "pipelines,",
                                                                               "standalone"]
    assert covered_text("# Platform in the cockpit: Kubernetes, Pipelines endpoint http://x\n").strip() == ""


async def test_a_verify_or_run_that_cannot_reach_a_cluster_keeps_what_was_saved(settings):
    lesson = Lesson(None, settings, unreachable="the API server does not answer")
    lesson._record(lesson.step("6"), Evidence(ok=True, checked="resumed", seen="resumed from step 5"))
    saved = lesson.store.path.read_bytes()
    evidence = await lesson.verify("6")
    assert not evidence.ok and evidence.seen.endswith("does not answer: the API server does not answer")
    updates = [u async for u in lesson.run("setup-2")]
    assert [u.kind for u in updates] == ["evidence"] and not updates[0].evidence.ok
    assert lesson.store.path.read_bytes() == saved
    assert Lesson(None, settings).state("6").status is StepStatus.DONE


def test_step_7s_measured_table_does_not_pass_for_the_learner_and_their_reading_is_kept():
    from backend.lesson.notes import check_note
    from backend.lesson.scaling_step import note_with_table, side_by_side
    from backend.models import RunMetrics

    runs = [("lesson-scale-1w-aaaaaa", RunMetrics(run="lesson-scale-1w-aaaaaa", final_loss=0.051, steps=40,
                                                  world_size=1, wall_seconds=3.2)),
            ("lesson-scale-2w-bbbbbb", RunMetrics(run="lesson-scale-2w-bbbbbb", final_loss=0.049, steps=40,
                                                  world_size=2, wall_seconds=2.1))]
    table = side_by_side(runs)
    assert not check_note("7", table, "").ok  # the cockpit's own figures are not the learner's note
    prefilled = note_with_table("", table)
    assert "| 2 | 0.049000 | 2.10 s | 40 | lesson-scale-2w-bbbbbb |" in prefilled
    assert not check_note("7", prefilled, "").ok
    reading = "Two workers took less wall time than one worker, for about the same final loss."
    written = prefilled.replace("<your reading of the numbers: final loss and wall time, 1 worker against 2>",
                                reading)
    assert check_note("7", written, "").ok
    again = note_with_table(written, side_by_side(runs[::-1]))  # a second run: a new table, the reading kept
    assert again.index("lesson-scale-2w-bbbbbb") < again.index("lesson-scale-1w-aaaaaa") < again.index(reading)
    assert again.count("Step 7: one worker against two") == 1 and check_note("7", again, "").ok
    assert note_with_table("<run step 7: it fills in the table>\n", table) == prefilled  # the draft goes


async def test_a_run_stopped_early_keeps_a_done_step_done_and_fails_an_undone_one(settings, monkeypatch):
    """Quitting the cockpit while a done step runs again: the new run proves nothing, the old
    evidence still holds (its job may well go on training)."""
    import asyncio

    from backend.lesson.context import Handler, line
    from backend.lesson.handlers import HANDLERS

    async def run_forever(ctx):
        yield line("training…")
        await asyncio.Event().wait()

    async def never_verified(ctx):
        raise AssertionError("a stopped run is not verified")

    for step_id in ("8", "9"):
        monkeypatch.setitem(HANDLERS, step_id, Handler(verify=never_verified, run=run_forever))
    lesson = Lesson(None, settings)
    done = Evidence(ok=True, checked="two Ray Train workers", seen="both reported", at=1.0)
    lesson._record(lesson.step("8"), done)
    for step_id in ("8", "9"):
        for need in lesson.step(step_id).needs:
            lesson._record(lesson.step(need), Evidence(ok=True, checked="-", seen="-"))
        run = lesson.run(step_id)
        assert (await anext(run)).text == "training…"
        assert lesson.state(step_id).status is StepStatus.RUNNING
        await run.aclose()
    assert lesson.state("8").status is StepStatus.DONE and lesson.state("8").evidence == done
    stopped = lesson.state("9")
    assert stopped.status is StepStatus.FAILED and stopped.evidence.seen == "the run was stopped before it finished"


def test_step_7s_note_may_use_the_prompts_own_words():
    """The prompt says "the one-worker run against the two-worker run": those words count."""
    from backend.lesson.notes import check_note

    note = ("The one-worker run ended at final loss 0.05 after 30 s of wall time; the two-worker run "
            "reached the same loss in 18 s.")
    evidence = check_note("7", note, "")
    assert evidence.ok, evidence.seen


def test_a_note_is_counted_with_the_right_article():
    from backend.lesson.notes import check_note

    note = " ".join(["The Trainer launches the worker pods and gives each its rank;",
                     "PyTorch runs DDP's gradient all-reduce."])
    words = len(note.split())
    assert check_note("2", note, "").seen.startswith(("an " if words in (8, 11, 18) else "a ") + f"{words}-word")


async def test_step_2_cites_the_anatomy_the_learner_looked_at(settings):
    from backend.anatomy.build import anatomy_of
    from tests.backend.anatomy_objects import lesson_objects

    lesson = Lesson(None, settings)
    lesson.save_note("2", GOOD_STEP2_NOTE)
    before = await lesson.verify("2")
    assert before.ok and any("press a in the cockpit" in d for d in before.details)
    lesson.saw_anatomy(anatomy_of(lesson_objects()))  # what `a` or `kfcockpit explain` showed
    after = await Lesson(None, settings).verify("2")
    assert after.ok
    assert "you looked at lesson-ddp's pod lesson-ddp-node-0-1-ab1cd (rank 1):" in after.details
    assert ("  PET_MASTER_ADDR, PET_MASTER_PORT, PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE: "
            "by the Trainer's torch plugin") in after.details
    assert "  volume checkpoints (claim checkpoints): by kfcockpit.io/lesson" in after.details
    assert "  node kfcockpit-worker2: by the scheduler" in after.details
