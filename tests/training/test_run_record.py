"""The run's record on its volume (training/run_record.py): every line a worker prints, kept where
every group's pods can write and a reader pod can read after they are gone."""

from __future__ import annotations

import os

from backend.goodput import goodput_of
from backend.kube.volume_reader import main as reader_main, parse_output, records
from backend.local.controllers.hostpath import take_snapshot
from backend.models import LogLine
from training import run_record


def record(run_dir, rank: int, lines: list[str]) -> None:
    run_record.start(run_dir, rank)
    try:
        for line in lines:
            run_record.write(line)
    finally:
        run_record.stop()


def test_each_rank_appends_its_own_file_and_a_new_group_appends_to_the_same(tmp_path):
    run = tmp_path / "vol" / "job-a"
    record(run, 0, ["event=start rank=0 world=2 pid=1", "step=1 loss=0.5 rank=0 world=2"])
    record(run, 1, ["event=start rank=1 world=2 pid=2", "step=1 loss=0.5 rank=1 world=2"])
    record(run, 0, ["event=start rank=0 world=2 pid=3"])  # the restarted group's rank 0
    assert sorted(os.listdir(run / run_record.DIRECTORY)) == ["rank-0.log", "rank-1.log"]
    lines = [line for _, line in run_record.read(run)]
    assert lines == ["event=start rank=0 world=2 pid=1", "step=1 loss=0.5 rank=0 world=2",
                     "event=start rank=0 world=2 pid=3", "event=start rank=1 world=2 pid=2",
                     "step=1 loss=0.5 rank=1 world=2"]


def test_a_line_cut_short_by_a_crash_is_skipped_and_nothing_is_written_without_a_record(tmp_path):
    run = tmp_path / "job-b"
    record(run, 0, ["step=1 loss=0.5 rank=0 world=1"])
    with open(run / run_record.DIRECTORY / "rank-0.log", "a") as f:
        f.write("17000")  # a crash mid-write
    run_record.write("step=2 loss=0.4 rank=0 world=1")  # no record open: nowhere, no error
    assert [line for _, line in run_record.read(run)] == ["step=1 loss=0.5 rank=0 world=1"]


def test_the_reader_pod_reads_one_runs_records_merged_in_time_and_nothing_outside_the_volume(tmp_path, capsys):
    volume = tmp_path / "vol"
    record(volume / "job-c", 1, ["event=start rank=1 world=2 pid=2"])
    record(volume / "job-c", 0, ["event=start rank=0 world=2 pid=1"])
    record(volume / "job-c-other", 0, ["event=start rank=0 world=1 pid=9"])  # another run
    record(tmp_path / "outside", 0, ["step=1 loss=0.5 rank=0 world=1"])
    found = records(volume, "job-c")
    assert [line for _, line in found["records"]] == ["event=start rank=1 world=2 pid=2",
                                                      "event=start rank=0 world=2 pid=1"]
    assert records(volume, "../outside") == {"records": []}
    assert reader_main([str(volume), "--records", "job-c"]) == 0
    assert parse_output(capsys.readouterr().out)["records"] == [list(pair) for pair in found["records"]]
    assert reader_main([str(volume), "--records"]) == 2


def test_a_snapshot_copies_the_records_a_running_job_still_appends_to(tmp_path):
    volume = tmp_path / "vol"
    record(volume / "job-d", 0, ["step=1 loss=0.5 rank=0 world=1"])
    take_snapshot(volume, tmp_path / "snap")
    record(volume / "job-d", 0, ["step=2 loss=0.4 rank=0 world=1"])  # after the snapshot
    kept = tmp_path / "snap" / "data" / "job-d"
    assert [line for _, line in run_record.read(kept)] == ["step=1 loss=0.5 rank=0 world=1"]


def test_goodput_from_a_record_sees_the_groups_whose_pods_are_gone(tmp_path):
    run = tmp_path / "job-e"
    record(run, 0, ["event=start rank=0 world=1 pid=1", "event=training_started step=0 rank=0 world=1",
                    "step=1 loss=0.5 rank=0 world=1", "event=start rank=0 world=1 pid=2",
                    "event=resumed from_step=1 rank=0 world=1 restore_seconds=0.0",
                    "step=2 loss=0.4 rank=0 world=1"])
    lines = [LogLine.parsed("pod", 0, at, line) for at, line in run_record.read(run)]
    assert goodput_of(lines).restarts == 1


def test_a_ray_storage_without_a_run_name_is_read_through_its_runs(tmp_path):
    volume = tmp_path / "vol"
    record(volume / "lesson-ray" / "ray-20261201-abc", 0, ["event=start rank=0 world=1 pid=1 launcher=ray"])
    assert [line for _, line in records(volume, "lesson-ray")["records"]] == [
        "event=start rank=0 world=1 pid=1 launcher=ray"]


def test_a_jobs_summary_says_where_its_run_directory_is():
    import yaml

    from backend.kube.jobs import summarize
    from backend.kube.rayjobs import summarize_rayjob
    from tests.local.conftest import MANIFESTS

    trainjob = yaml.safe_load((MANIFESTS / "trainjob.yaml").read_text())
    trainjob["metadata"]["creationTimestamp"] = "2026-12-01T00:00:00Z"
    assert summarize(trainjob, None).run_dirs == [("checkpoints", "lesson-ddp")]
    rayjob = yaml.safe_load((MANIFESTS / "rayjob.yaml").read_text())
    assert summarize_rayjob(rayjob).run_dirs == [("checkpoints", "lesson-ray")]
