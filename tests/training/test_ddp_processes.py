"""The training core in real torchrun processes: identical losses, exact resume, safe files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from tests.training.conftest import REPO, Run, env, plain_cmd, run, torchrun_cmd
from training import checkpoint_format as fmt
from training.logfmt import parse_line


def _losses_by_step(records: list[dict[str, str]]) -> dict[int, dict[str, str]]:
    by_step: dict[int, dict[str, str]] = defaultdict(dict)
    for r in records:
        if "step" in r and "loss" in r and "event" not in r:
            by_step[int(r["step"])][r["rank"]] = r["loss"]
    return by_step


def _final_params(directory: Path) -> dict[str, torch.Tensor]:
    return torch.load(fmt.list_files(directory)[-1], weights_only=True)["model"]


# Every run here trains these 20 steps; --step-delay only sleeps between them, so a paced run
# ends bitwise equal to an unpaced one.
ARGS = ["--steps", "20", "--ckpt-every", "5"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> tuple[Run, Path]:
    """One uninterrupted two-worker run of ARGS (its result, its checkpoint directory): what the
    first test checks, and the reference the killed-and-resumed runs must end equal to."""
    ckpt_dir = tmp_path_factory.mktemp("straight") / "ckpt"
    return run(torchrun_cmd(2, *ARGS, "--ckpt-dir", str(ckpt_dir))), ckpt_dir


def test_two_ranks_print_the_same_loss_at_every_step(straight):
    result, ckpt_dir = straight
    assert result.returncode == 0, result.stderr[-2000:]
    by_step = _losses_by_step(result.records())
    assert sorted(by_step) == list(range(1, 21))
    for step, losses in by_step.items():
        assert set(losses) == {"0", "1"}, f"step {step}: ranks {sorted(losses)}"
        assert losses["0"] == losses["1"], f"step {step}: {losses}"
    # each rank's own time in the step and its wait for its peer, on every step line
    steps = [r for r in result.records() if "loss" in r and "event" not in r]
    assert all(float(r["compute"]) > 0 and float(r["wait"]) >= 0 for r in steps), steps[:2]
    metrics = json.loads((ckpt_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["steps"] == 20 and metrics["resumes"] == 0
    assert f"{metrics['final_loss']:.6f}" == by_step[20]["0"]


def _run_and_kill_rank_1_at(step: int, args: list[str]) -> tuple[int, list[dict[str, str]]]:
    """torchrun 2 workers; SIGKILL rank 1 once a rank printed `step`; (exit code, every line)."""
    proc = subprocess.Popen(torchrun_cmd(2, *args), cwd=REPO, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    records, rank1_pid = [], None
    for line in proc.stdout:  # read to the end: the survivor still prints its save
        fields = parse_line(line)
        records.append(fields)
        if fields.get("event") == "start" and fields.get("rank") == "1":
            rank1_pid = int(fields["pid"])
        if fields.get("step") == str(step) and "event" not in fields and rank1_pid:
            os.kill(rank1_pid, signal.SIGKILL)
            rank1_pid = None
    return proc.wait(timeout=120), records


def test_sigkill_of_rank_1_survivor_saves_the_interrupted_step_and_resume_is_bitwise_equal(straight, tmp_path):
    # Paced so the kill lands mid-run: 8 steps (0.8 s and more) are left after step 12.
    args = [*ARGS, "--step-delay", "0.1"]
    reference, straight_dir = straight
    assert reference.returncode == 0, reference.stderr[-2000:]
    resumed = tmp_path / "resumed"

    # Periodic checkpoints at 5 and 10 exist when rank 1 dies after step 12.
    code, records = _run_and_kill_rank_1_at(12, [*args, "--ckpt-dir", str(resumed)])
    assert code != 0 and not (resumed / "metrics.json").exists()
    (survivor,) = [r for r in records if r.get("event") == "checkpoint_saved"
                   and r["reason"] in ("peer_failure", "sigterm")]
    # The survivor saved the newest step whose update every rank applied: the one printed last.
    saved = int(survivor["step"])
    assert survivor["rank"] == "0" and saved >= 12
    assert saved == max(int(r["step"]) for r in records if "step" in r and "event" not in r)

    relaunch = run(torchrun_cmd(2, *args, "--ckpt-dir", str(resumed)))
    assert relaunch.returncode == 0, relaunch.stderr[-2000:]
    resumed_events = relaunch.events("resumed")
    assert {e["rank"] for e in resumed_events} == {"0", "1"}
    assert all(int(e["from_step"]) == saved for e in resumed_events)
    assert min(_losses_by_step(relaunch.records())) == saved + 1

    a = json.loads((straight_dir / "metrics.json").read_text())
    b = json.loads((resumed / "metrics.json").read_text())
    assert b["resumes"] == 1
    assert a["params_sha256"] == b["params_sha256"]
    assert a["loss_history"] == b["loss_history"]
    pa, pb = _final_params(straight_dir), _final_params(resumed)
    assert pa.keys() == pb.keys()
    for name in pa:
        assert torch.equal(pa[name], pb[name]), name


def test_rank_0_killed_mid_periodic_save_leaves_the_step_to_the_survivor(straight, tmp_path):
    # Rank 0 dies holding the claim of step 15 (its writer thread is between write and rename),
    # during the pause after step 15, so the survivor's newest complete step is 15 too.
    reference, straight_dir = straight
    assert reference.returncode == 0, reference.stderr[-2000:]
    killed = tmp_path / "killed"

    crashed = run(torchrun_cmd(2, *ARGS, "--step-delay", "0.5", "--ckpt-dir", str(killed)),
                  KFCOCKPIT_FAULT="crash_before_rename@15:periodic")
    assert crashed.returncode != 0
    # Rank 0 died holding step 15's claim (the survivor took it over: generation 1), and the
    # survivor wrote over the unfinished file it left, whose pages were just written.
    assert sorted(p.name for p in fmt.claim_names(killed, 15)) == [fmt.claim_name(15), fmt.claim_name(15, 1)], \
        "rank 0 did not die mid-save"
    assert not list(killed.glob(".ckpt-step-*.pt.tmp-*"))
    (survivor,) = [e for e in crashed.events("checkpoint_saved") if e["reason"] != "periodic"]
    assert (survivor["rank"], survivor["step"]) == ("1", "15")

    relaunch = run(torchrun_cmd(2, *ARGS, "--ckpt-dir", str(killed)))
    assert relaunch.returncode == 0, relaunch.stderr[-2000:]
    assert [e["from_step"] for e in relaunch.events("resumed")] == ["15", "15"]
    a = json.loads((straight_dir / "metrics.json").read_text())
    b = json.loads((killed / "metrics.json").read_text())
    assert a["params_sha256"] == b["params_sha256"] and a["loss_history"] == b["loss_history"]


def test_truncated_newest_checkpoint_falls_back_to_the_previous_one(ckpt_dir):
    first = run(plain_cmd("--steps", "10", "--ckpt-every", "5", "--ckpt-dir", str(ckpt_dir)))
    assert first.returncode == 0, first.stderr
    newest = ckpt_dir / fmt.file_name(10)
    newest.write_bytes(newest.read_bytes()[:-1000])  # a torn write the disk did not report
    (ckpt_dir / "metrics.json").unlink()

    again = run(plain_cmd("--steps", "12", "--ckpt-every", "5", "--ckpt-dir", str(ckpt_dir)))
    assert again.returncode == 0, again.stderr
    skipped = again.events("checkpoint_skipped")
    assert len(skipped) == 1 and skipped[0]["file"] == newest.name
    assert skipped[0]["reason"].startswith("truncated")
    assert [e["from_step"] for e in again.events("resumed")] == ["5"]


def test_crash_between_write_and_rename_leaves_nothing_resume_would_pick(tmp_path):
    args = ["--steps", "12", "--ckpt-every", "5"]
    crashed_dir, straight_dir = tmp_path / "crashed", tmp_path / "straight"
    crashed = run(plain_cmd(*args, "--ckpt-dir", str(crashed_dir)),
                  KFCOCKPIT_FAULT="crash_before_rename@10")
    assert crashed.returncode == 137
    temps = list(crashed_dir.glob(".ckpt-step-000010.pt.tmp-*"))
    assert len(temps) == 1 and temps[0].stat().st_size > 0  # the crash left a full temp file
    assert [p.name for p in fmt.list_files(crashed_dir)] == [fmt.file_name(5)]

    again = run(plain_cmd(*args, "--ckpt-dir", str(crashed_dir)))
    assert again.returncode == 0, again.stderr
    assert [e["from_step"] for e in again.events("resumed")] == ["5"]
    assert not list(crashed_dir.glob(".ckpt-*tmp*"))  # cleaned on start

    straight = run(plain_cmd(*args, "--ckpt-dir", str(straight_dir)))
    assert straight.returncode == 0
    a = json.loads((crashed_dir / "metrics.json").read_text())
    b = json.loads((straight_dir / "metrics.json").read_text())
    assert a["params_sha256"] == b["params_sha256"]


def test_bad_arguments_get_one_line_and_exit_2(tmp_path):
    zero = run(plain_cmd("--steps", "0"))
    assert zero.returncode == 2
    assert zero.stderr.strip().splitlines() == ["training.ddp: error: --steps must be at least 1, got 0"]

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    unwritable = run(plain_cmd("--steps", "3", "--ckpt-dir", str(blocker / "ckpt")))
    assert unwritable.returncode == 2
    lines = unwritable.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"training.ddp: error: cannot write to --ckpt-dir {blocker}")
    assert "Traceback" not in unwritable.stderr

    too_small = run(plain_cmd("--steps", "3", "--samples", "8", "--batch-size", "32"))
    assert too_small.returncode == 2
    assert too_small.stderr.strip().splitlines()[-1].startswith("training.ddp: error: --samples 8 is too small")
