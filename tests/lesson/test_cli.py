"""`kfcockpit lesson …` as a learner types it: one clear line and exit 2 for bad input, notes from
files, status as JSON."""

from __future__ import annotations

import json

from tests.lesson.conftest import kfcockpit
from tests.lesson.test_progress_and_notes import GOOD_STEP2_NOTE


def test_unknown_step_is_one_line_and_exit_2(home):
    result = kfcockpit("lesson", "run", "13", home=home)
    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and result.err.startswith("kfcockpit: unknown step '13'")


def test_out_of_order_step_says_what_to_do_first(home):
    result = kfcockpit("lesson", "run", "6", home=home)
    assert result.code == 2
    assert result.err == ("kfcockpit: do step 5 first: Give the workers a shared checkpoint volume, "
                          "created by the pipeline (kfcockpit lesson run 5); step 6 needs it\n")
    status = json.loads(kfcockpit("lesson", "status", "-o", "json", home=home).out)
    assert {s["status"] for s in status} == {"todo"}  # nothing was started


def test_missing_note_file_is_one_line(home, tmp_path):
    result = kfcockpit("lesson", "note", "2", "--note", str(tmp_path / "absent.md"), home=home)
    assert result.code == 2 and "cannot read the note file" in result.err
    assert result.err.count("\n") == 1


def test_note_from_a_file_then_status_json(home, tmp_path):
    note = tmp_path / "note.md"
    note.write_text(GOOD_STEP2_NOTE)
    saved = kfcockpit("lesson", "note", "2", "--note", str(note), home=home)
    assert saved.code == 0 and "PASS  step 2" in saved.out
    shown = kfcockpit("lesson", "note", "2", home=home)
    assert shown.out == GOOD_STEP2_NOTE + "\n"
    status = {s["id"]: s for s in json.loads(kfcockpit("lesson", "status", "-o", "json", home=home).out)}
    assert status["2"]["status"] == "done" and status["2"]["has_note"]
    assert status["2"]["evidence"]["ok"] is True
    assert status["3"]["status"] == "todo" and status["3"]["evidence"] is None


def test_run_a_reading_step_with_a_note_from_stdin(home):
    weak = kfcockpit("lesson", "run", "2", "--note", "-", stdin="The Trainer starts pods.", home=home)
    assert weak.code == 1 and "NOT DONE  step 2: missing:" in weak.out
    good = kfcockpit("lesson", "run", "2", "--note", "-", stdin=GOOD_STEP2_NOTE, home=home)
    assert good.code == 0 and "PASS  step 2" in good.out


def test_reset_one_step(home, tmp_path):
    note = tmp_path / "note.md"
    note.write_text(GOOD_STEP2_NOTE)
    kfcockpit("lesson", "note", "2", "--note", str(note), home=home)
    reset = kfcockpit("lesson", "reset", "2", home=home)
    assert reset.code == 0 and "kept" in reset.out
    status = {s["id"]: s for s in json.loads(kfcockpit("lesson", "status", "-o", "json", home=home).out)}
    assert status["2"]["status"] == "todo" and status["2"]["has_note"]


def test_run_needs_a_step_or_all(home):
    assert kfcockpit("lesson", "run", home=home).code == 2
    both = kfcockpit("lesson", "run", "3", "--all", home=home)
    assert both.code == 2 and "not both" in both.err


def test_a_cluster_that_does_not_answer_blocks_only_the_steps_that_need_it(home, tmp_path):
    absent = str(tmp_path / "no-kubeconfig")
    refused = kfcockpit("lesson", "run", "setup-2", "--backend", "kube", "--kubeconfig", absent, home=home)
    assert refused.code == 2 and refused.out == ""
    assert refused.err.startswith("kfcockpit: setup 2 needs the cluster: ") and refused.err.count("\n") == 1
    note = tmp_path / "note.md"
    note.write_text(GOOD_STEP2_NOTE)
    reading = kfcockpit("lesson", "run", "2", "--note", str(note), "--backend", "kube",
                        "--kubeconfig", absent, home=home)
    assert reading.code == 0 and "PASS  step 2" in reading.out
