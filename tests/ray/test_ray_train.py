"""The Ray Train variant in real Ray, run as a RayJob on the embedded cluster: reports from every
worker, a killed worker pod whose surviving peer saves the step the kill interrupted, the group Ray
restarts resuming there, the same result as the TrainJob and as an uninterrupted torchrun run,
nothing left running."""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

import pytest

from backend.local.layout import Layout
from backend.local.node.podspec import ENV_POD, cluster_marker
from backend.processes import marked_processes
from backend.models import DRIVER_RANK
from backend.raytrain.tempdir import ray_temp_dir
from tests.ray.conftest import PLAN, straight_metrics
from training import checkpoint_format as fmt
from training import metrics as metrics_file
from training import run_record
from training.logfmt import parse_line
from training.ray_checkpoints import SURVIVOR_REASONS
from training.ray_train import REPORTS_FILE


def _losses_by_step(lines) -> dict[int, dict[str, set[str]]]:
    by_step: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for line in lines:
        if line.step is not None:
            fields = parse_line(line.text)
            assert fields["rank"] == str(line.rank), line  # each line sits in its worker's pod
            by_step[line.step][fields["rank"]].add(fields["loss"])
    return by_step


def _events(texts: Iterable[str], event: str) -> list[dict[str, str]]:
    return [fields for text in texts if f"event={event}" in text
            for fields in [parse_line(text)] if fields.get("event") == event]


def _streamed(measured) -> list[str]:
    return [line.text for line in measured.ray_lines]


def _recorded(measured) -> list[str]:
    """The Ray workers' lines as they recorded them on the volume while printing them
    (training/run_record.py): all in once the job is, whereas Ray forwards a worker's printed
    lines after the fact, so a torn-down survivor's last ones can reach its pod's log after its
    process is gone and the log's followers have stopped."""
    return [line for _, line in run_record.read(run_path(measured, measured.ray))]


def run_path(measured, m) -> Path:
    """Where a side's run directory (<volume>/<run>) is on the embedded cluster's disk."""
    volume, run = m.run_dir.split("/", 1)
    return Layout(measured.settings.home).claim_dir("default", volume) / run


def _reports(measured) -> list[dict]:
    text = (run_path(measured, measured.ray) / REPORTS_FILE).read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_two_ray_workers_report_metrics_for_every_epoch_with_identical_losses(measured):
    rounds = [r for r in _reports(measured) if "metrics" in r]
    assert rounds, "the controller saw no ray.train.report"
    for r in rounds:
        assert [m["rank"] for m in r["metrics"]] == [0, 1], r
        first, second = r["metrics"]
        assert first["step"] == second["step"] and first["epoch"] == second["epoch"], r
        assert first["loss"] == second["loss"] and first["mean_loss"] == second["mean_loss"], r
        assert first["pid"] != second["pid"]
    steps_per_epoch = PLAN.samples // PLAN.workers // PLAN.batch_size
    reported_epochs = {r["metrics"][0]["epoch"] for r in rounds}
    assert reported_epochs == set(range(PLAN.steps // steps_per_epoch))
    # every checkpoint step was reported, each with the checkpoint Ray persisted for it
    with_checkpoint = {r["metrics"][0]["step"]: r["checkpoint"] for r in rounds if r["checkpoint"]}
    assert sorted(with_checkpoint) == list(range(PLAN.ckpt_every, PLAN.steps + 1, PLAN.ckpt_every))
    # and the workers' own log says so too, in logfmt
    assert {fields["rank"] for fields in _events(_streamed(measured), "reported")} == {"0", "1"}


def test_every_step_line_has_the_same_loss_on_both_ray_workers(measured):
    by_step = _losses_by_step(measured.ray_lines)
    assert sorted(by_step) == list(range(1, PLAN.steps + 1))
    for step, per_rank in by_step.items():
        assert set(per_rank) == {"0", "1"}, f"step {step}: ranks {sorted(per_rank)}"
        # steps redone after the restart print exactly what they printed the first time
        assert len(per_rank["0"]) == 1 and per_rank["0"] == per_rank["1"], f"step {step}: {per_rank}"


def test_a_killed_ray_worker_resumes_from_the_checkpoint_not_from_zero(measured):
    starts = _events(_streamed(measured), "start")
    assert len(starts) == 4 and {s["rank"] for s in starts} == {"0", "1"}
    first_group, second_group = starts[:2], starts[2:]
    assert {s["rank"] for s in first_group} == {s["rank"] for s in second_group} == {"0", "1"}
    assert not {s["pid"] for s in first_group} & {s["pid"] for s in second_group}

    resumed = _events(_streamed(measured), "resumed")
    assert sorted(r["rank"] for r in resumed) == ["0", "1"]
    from_steps = {int(r["from_step"]) for r in resumed}
    assert len(from_steps) == 1
    checkpoint_step = from_steps.pop()
    # Ray forwards the workers' lines with a lag, so the kill can land a few steps after the
    # kill step; the survivor saved the step it interrupted and the new group resumes there.
    assert checkpoint_step >= PLAN.kill_at_step
    assert checkpoint_step == measured.ray.last_step_before_recovery

    errors = [r for r in _reports(measured) if "errors" in r]
    assert errors, "Ray's controller recorded no worker failure"
    final = metrics_file.read(run_path(measured, measured.ray))
    assert final["launcher"] == "ray" and final["resumes"] == 1 and final["world_size"] == 2
    assert len(final["loss_history"]) == PLAN.steps

    ray = measured.ray
    assert ray.restarts == 1 and ray.resumed_from_step == checkpoint_step
    assert ray.steps_lost == ray.last_step_before_recovery - checkpoint_step


def test_the_survivor_saved_the_interrupted_step_and_rays_teardown_waited_for_it(measured):
    # Over the whole run (only the first group was torn down mid-run), from the run's record:
    # written before Ray's teardown may end the survivor, so complete once the job is
    saved = [(e["rank"], int(e["step"])) for e in _events(_recorded(measured), "checkpoint_saved")
             if e["reason"] in SURVIVOR_REASONS]
    # rank 1 was killed; rank 0 saved its newest complete step
    assert saved == [("0", measured.ray.last_step_before_recovery)]
    # Ray's teardown of the failed group reached the survivor and ended only once its loop had
    # left, after the save: Ray waited for it (it came while the loop paused between steps), or
    # the loop's failed collective came first and there was nothing left to wait for
    holds = [(e["rank"], e["left"]) for e in _events(_recorded(measured), "shutdown_hold")]
    assert holds == [("0", "True")]


def test_every_line_a_ray_worker_recorded_reached_the_jobs_log_stream(measured):
    """Ray forwards a worker's lines after it prints them: a torn-down survivor's last ones (its
    save, its hold) come after its process is gone, and its pod's log must still carry them."""
    assert Counter(_recorded(measured)) - Counter(_streamed(measured)) == Counter()


def test_the_run_with_a_kill_ends_bitwise_equal_to_an_uninterrupted_torchrun_run(measured, straight, state_root):
    reference = straight_metrics(straight, state_root)
    final = metrics_file.read(run_path(measured, measured.ray))
    assert final["resumes"] == 1
    assert final["params_sha256"] == reference["params_sha256"]
    assert final["loss_history"] == reference["loss_history"]


def test_ray_checkpoints_are_cockpit_checkpoint_files(measured):
    run_dir = run_path(measured, measured.ray)
    files = sorted(run_dir.glob("ckpt-step-*/ckpt-step-*.pt"))
    assert files, f"no checkpoint files under {run_dir}"
    for path in files:
        info = fmt.inspect(path)
        assert info.valid, info.problem
        assert path.parent.name == path.stem and info.world_size == 2
    # CheckpointConfig(num_to_keep=keep) pruned the older ones, the survivor's save among them
    assert [fmt.inspect(path).step for path in files] == [PLAN.steps - k * PLAN.ckpt_every for k in (2, 1, 0)]


def test_the_same_loop_both_ways_ends_with_the_same_parameters(measured):
    trainer, ray = measured.trainer, measured.ray
    assert measured.comparison.same_result(), (trainer.params_sha256, ray.params_sha256)
    assert trainer.final_loss == ray.final_loss
    torchrun_losses = _losses_by_step(measured.trainer_lines)
    ray_losses = _losses_by_step(measured.ray_lines)
    assert {s: v["0"] for s, v in torchrun_losses.items()} == {s: v["0"] for s, v in ray_losses.items()}


def test_no_ray_process_is_left_behind_and_temp_files_stay_under_the_state_root(measured):
    driver = {line.pod for line in measured.ray_lines if line.rank == DRIVER_RANK}
    assert len(driver) == 1
    root = Layout(measured.settings.home).root
    assert list(marked_processes({**cluster_marker(root), ENV_POD: driver.pop()})) == []
    temp = ray_temp_dir(measured.settings.home)
    mine = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if str(temp).encode() in cmdline:
                mine.append((entry.name, cmdline[:120]))
    assert mine == [], f"processes still using {temp}: {mine}"
    assert list(temp.glob("session_*/logs")), f"Ray's session is not under {temp}"
    (started,) = _events(_streamed(measured), "ray_started")
    assert started["temp_dir"] == str(temp) and started["node"] == "127.0.0.1"


@pytest.mark.parametrize("index", [0, 1])
def test_measured_figures_are_consistent(measured, index):
    m = measured.comparison.sides[index]
    assert 0 < m.time_to_first_step < m.wall_seconds
    assert 0 < m.recovery_seconds < m.wall_seconds
    assert m.killed_at_step >= PLAN.kill_at_step and m.killed_rank == PLAN.kill_rank
    assert m.last_step_before_recovery >= m.killed_at_step
    assert 0 < m.resumed_from_step <= m.last_step_before_recovery and m.restarts == 1
    # both ways the survivor saves the step the kill interrupted (SIGTERM, peer failure, or Ray's
    # worker shutdown), so the restarted group resumes there, not at the last periodic checkpoint;
    # if not, the survivor's own lines say what it did (its save, Ray's hold on the teardown)
    lines = measured.trainer_lines if m.side == "trainer" else measured.ray_lines
    survivor = [line.text for line in lines
                if "event=shutdown_hold" in line.text or "event=checkpoint_saved" in line.text
                and parse_line(line.text).get("reason") in SURVIVOR_REASONS]
    assert m.resumed_from_step >= m.killed_at_step, (m.side, m.killed_at_step, m.resumed_from_step, survivor)
    assert m.steps_lost == m.last_step_before_recovery - m.resumed_from_step < PLAN.ckpt_every
    assert run_path(measured, m).is_dir() and m.job.startswith(m.run_dir.split("/")[0])
