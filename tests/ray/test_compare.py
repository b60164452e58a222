"""`kfcockpit compare`: the table and the step-10 note hold the numbers measured in this test run,
through the Cluster protocol (a TrainJob and a RayJob on the embedded cluster)."""

from __future__ import annotations

import asyncio
import json

from backend.compare import latest_comparison
from backend.compare.store import comparisons_dir
from backend.connect import connect
from backend.models import JobPhase
from tests.ray.conftest import PLAN, run_cli


def test_the_saved_comparison_is_the_measured_one(measured):
    saved = latest_comparison(measured.settings)
    assert saved == measured.comparison
    assert len(list(comparisons_dir(measured.settings).glob("comparison-*.json"))) == 1
    assert [m.side for m in saved.sides] == ["trainer", "ray"]


def test_compare_last_prints_the_measured_numbers_in_a_table(measured):
    result = run_cli("compare", "--last", home=measured.settings.home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = lines[0]
    assert "Trainer (TrainJob)" in header and "Ray Train (TorchTrainer)" in header
    table = {line.split("   ")[0].strip(): line for line in lines[1:] if line.strip()}
    trainer, ray = measured.trainer, measured.ray
    for label, figure in (("time to first step", lambda m: f"{m.time_to_first_step:.1f} s"),
                          ("recovery after kill", lambda m: f"{m.recovery_seconds:.1f} s"),
                          ("final loss", lambda m: f"{m.final_loss:.6f}"),
                          ("wall time", lambda m: f"{m.wall_seconds:.1f} s"),
                          ("steps lost", lambda m: f"{m.steps_lost} (")):
        row = table[label]
        assert row.index(figure(trainer)) < row.rindex(figure(ray)), (label, row)
    assert "declared TrainJob" in table["launch model"] and "Python fit() in RayJob" in table["launch model"]
    assert "platform team" in table["job definition owner"] and "ML team" in table["job definition owner"]
    assert max(len(line) for line in lines[: len(table) + 1]) <= 80  # an 80x24 terminal


def test_both_sides_ran_as_jobs_on_the_embedded_cluster(measured):
    cluster = connect(measured.settings)

    async def look():
        volume = measured.trainer.run_dir.split("/")[0]
        return {m.run: m for m in await cluster.read_metrics(volume)}, await cluster.volumes()

    metrics, volumes = asyncio.run(look())
    jobs = {m.side: measured.rayjob.jobs[m.job] for m in measured.comparison.sides}  # read before the RayJob's delete
    assert (jobs["trainer"].launcher, jobs["ray"].launcher) == ("torchrun", "ray")
    for side, job in jobs.items():
        m = measured.comparison.side(side)
        assert (job.phase, job.restart_attempt, job.num_nodes) == (JobPhase.COMPLETE, 1, PLAN.workers), side
        run = metrics[m.run_dir.split("/", 1)[1]]
        assert (run.final_loss, run.params_sha256, run.resumes) == (m.final_loss, m.params_sha256, 1), side
        # launch (before apply) to the job's end; the API keeps those two to the whole second
        assert m.wall_seconds + 1 > job.finished - job.created > 0
    assert [v.name for v in volumes if v.name.startswith("cmp-")] == [measured.trainer.run_dir.split("/")[0]]


def test_compare_json_and_note_carry_the_same_figures(measured):
    as_json = run_cli("compare", "--last", "-o", "json", home=measured.settings.home)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["sides"][1]["recovery_seconds"] == measured.ray.recovery_seconds
    assert data["sides"][0]["time_to_first_step"] == measured.trainer.time_to_first_step

    note = run_cli("compare", "--last", "--note", home=measured.settings.home)
    assert note.returncode == 0, note.stderr
    assert note.stdout == measured.comparison.as_note()
    assert f"| recovery after kill | {measured.trainer.recovery_seconds:.1f} s | " \
           f"{measured.ray.recovery_seconds:.1f} s |" in note.stdout
    for topic in ("Launch model", "Failure recovery", "Who owns the job definition"):
        assert topic in note.stdout
    assert "bitwise-equal parameters" in note.stdout


def test_compare_refuses_bad_plans_in_one_line(state_root):
    for args, message in (
        (["--kill-at", "3"], "kfcockpit: the kill step must come after the first checkpoint"),
        (["--kill-rank", "2"], "kfcockpit: cannot kill rank 2: there are 2 workers"),
        (["--workers", "0"], "kfcockpit: --workers: input should be greater than or equal to 1"),
    ):
        result = run_cli("compare", *args, home=state_root / "refused")
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.splitlines() == [result.stderr.strip()] and result.stderr.startswith(message)
    nothing = run_cli("compare", "--last", home=state_root / "empty")
    assert nothing.returncode == 2
    assert nothing.stderr.strip() == "kfcockpit: no comparison measured yet: run `kfcockpit compare`"
