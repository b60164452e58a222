"""`kfcockpit lesson run --all` on the embedded cluster, for real: torchrun workers, kfp.local
pipelines, Ray Train, a killed pod and its group's resume, snapshots, a clean second cluster.
The evidence of steps 3 and 6 is asserted as the learner reads it."""

from __future__ import annotations

import json
import re

import pytest

from tests.lesson.conftest import kfcockpit, processes_under
from tests.lesson.test_progress_and_notes import GOOD_SETUP_NOTE, GOOD_STEP2_NOTE

# Every step for real, Ray and a second (clean) cluster included: minutes, not seconds.
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def run_all(tmp_path_factory):
    home = tmp_path_factory.mktemp("run-all") / "home"
    notes = home.parent / "notes"
    notes.mkdir()
    (notes / "setup-1.md").write_text(GOOD_SETUP_NOTE)
    (notes / "2.md").write_text(GOOD_STEP2_NOTE)
    try:
        for step in ("setup-1", "2"):
            assert kfcockpit("lesson", "note", step, "--note", str(notes / f"{step}.md"), home=home).code == 0
        result = kfcockpit("lesson", "run", "--all", home=home, timeout=1500)
        status = json.loads(kfcockpit("lesson", "status", "-o", "json", home=home).out)
    finally:
        down = kfcockpit("cluster", "down", home=home)
    assert down.code == 0, down.err
    return home, result, {s["id"]: s for s in status}


def _row(table: str, step: str) -> str:
    return next(line for line in table.splitlines() if line.split()[:1] == [step])


def test_every_step_passes_and_exit_is_0(run_all):
    _, result, status = run_all
    assert result.code == 0, result.out + result.err[-3000:]
    assert "14 of 14 passed" in result.out  # 12 action steps and 2 notes; step 10 has no note
    assert _row(result.out, "10").split()[1] == "note"
    assert {s["status"] for i, s in status.items() if i != "10"} == {"done"}


def test_step_3_both_ranks_printed_the_same_loss(run_all):
    _, result, status = run_all
    assert re.search(r"\bpass\s+rank 0 and rank 1 printed the same loss at all 40 steps$",
                     _row(result.out, "3")), _row(result.out, "3")
    assert status["3"]["evidence"]["seen"] == "rank 0 and rank 1 printed the same loss at all 40 steps"


def test_step_6_the_restarted_group_resumed_from_a_checkpoint(run_all):
    _, result, status = run_all
    seen = status["6"]["evidence"]["seen"]
    found = re.fullmatch(r"restart attempt (\d+) resumed from step (\d+) > 0", seen)
    assert found and int(found.group(1)) >= 1 and int(found.group(2)) > 0, seen
    assert seen in _row(result.out, "6")
    assert any(" printed event=resumed from_step=" in d for d in status["6"]["evidence"]["details"])


def test_nothing_is_left_running(run_all):
    home, _, _ = run_all
    assert processes_under(home) == []
