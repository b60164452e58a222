"""A Ray worker killed mid-run: the surviving worker saves the step the kill interrupted, in Ray's
checkpoint layout, and the group Ray restarts resumes from it, ending bitwise equal to a run
without kills. Real Ray and real gloo, one run (Ray is slow to start on two cores)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from tests.training.conftest import REPO, env, torchrun_cmd
from training import checkpoint_format as fmt
from training.logfmt import parse_line
from training.ray_checkpoints import SURVIVOR_REASONS

ARGS = ["--steps", "20", "--ckpt-every", "5", "--samples", "640"]
# After the first periodic checkpoint (5), so a resume from the survivor's save is told apart from
# one from Ray's checkpoint; the restarted group's checkpoints 10, 15 and 20 then supersede the save.
KILL_AFTER_STEP = 7
# Longer than Ray takes to see the dead worker and tear the group down (a 0.2 s health-check
# poll here): the survivor, pausing between steps when the kill lands, only reaches its save
# because the teardown waits for it.
STEP_DELAY = "0.5"


def _run_ray_and_kill_rank_1(storage: Path, name: str, on_first_step: Callable[[], None]) -> tuple[
        int, list[dict[str, str]]]:
    """training.ray_train, 2 workers; SIGKILL rank 1 once the first group printed the kill step.
    `on_first_step` is called when the first step line arrives: from then on the run mostly sleeps."""
    temp = Path(tempfile.mkdtemp(prefix="kfr-", dir="/tmp"))  # Ray's socket paths must stay short
    cmd = [sys.executable, "-m", "training.ray_train", "--num-workers", "2", "--storage", str(storage),
           "--name", name, "--temp-dir", str(temp), "--max-failures", "1", "--step-delay", STEP_DELAY, *ARGS]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    records, starts, victim = [], 0, None
    try:
        for line in proc.stdout:
            fields = parse_line(line) if "=" in line else {}
            records.append(fields)
            if fields.get("event") == "start":
                starts += 1
                if starts <= 2 and fields["rank"] == "1":
                    victim = int(fields["pid"])
            elif "loss" in fields and "event" not in fields:
                if on_first_step is not None:
                    on_first_step()
                    on_first_step = None
                if victim and int(fields["step"]) >= KILL_AFTER_STEP:
                    os.kill(victim, signal.SIGKILL)
                    victim = None
        return proc.wait(timeout=120), records
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(temp, ignore_errors=True)


def test_a_killed_ray_worker_leaves_its_step_to_the_survivor_and_resume_is_bitwise_equal(tmp_path):
    storage, name = tmp_path / "vol", "survivor"
    straight: list[subprocess.Popen] = []  # the reference run, without kills

    def start_straight() -> None:  # while the Ray run mostly sleeps between its paced steps
        straight.append(subprocess.Popen(torchrun_cmd(2, *ARGS, "--ckpt-dir", str(tmp_path / "straight")),
                                         cwd=REPO, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True))

    try:
        code, records = _run_ray_and_kill_rank_1(storage, name, start_straight)
        assert len(straight) == 1, records[-20:]
        _, straight_err = straight[0].communicate(timeout=240)
    finally:
        for proc in straight:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert code == 0, records[-20:]
    starts = [i for i, r in enumerate(records) if r.get("event") == "start"]
    assert len(starts) == 4, "Ray did not restart the group once"
    first_group = records[:starts[2]]
    last_step = max(int(r["step"]) for r in first_group if "loss" in r and "event" not in r)
    assert last_step >= KILL_AFTER_STEP

    resumed = [r for r in records if r.get("event") == "resumed"]
    assert sorted(r["rank"] for r in resumed) == ["0", "1"]
    from_steps = {int(r["from_step"]) for r in resumed}
    # the step the kill interrupted (the survivor's newest complete one), not the periodic 5
    assert from_steps == {last_step}, (from_steps, last_step)
    saved = [r for r in first_group if r.get("event") == "checkpoint_saved" and r["reason"] in SURVIVOR_REASONS]
    assert [(r["rank"], int(r["step"])) for r in saved] == [("0", last_step)]
    holds = [r for r in first_group if r.get("event") == "shutdown_hold"]
    assert [(r["rank"], r["left"]) for r in holds] == [("0", "True")]

    run_dir = storage / name
    # Once the restarted group reported newer checkpoints, the survivor's save is gone; Ray kept
    # its own newest `keep`, in the cockpit's format.
    kept = sorted(p.name for p in run_dir.glob("ckpt-step-*"))
    assert kept == [fmt.file_name(s).removesuffix(".pt") for s in (10, 15, 20)]
    final = json.loads((run_dir / "metrics.json").read_text())
    assert final["resumes"] == 1 and final["launcher"] == "ray"

    assert straight[0].returncode == 0, straight_err[-2000:]
    reference = json.loads((tmp_path / "straight" / "metrics.json").read_text())
    assert final["params_sha256"] == reference["params_sha256"]
    assert final["loss_history"] == reference["loss_history"]
