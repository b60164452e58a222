"""What the training core prints for goodput: the loop's checkpoint waits, on real lines; and the
learning rate each model preset trains with."""

from __future__ import annotations

import time

import pytest

from backend.goodput import Goodput
from tests.training.conftest import plain_cmd, run
from training.ddp import parse_args
from training.logfmt import parse_line


def test_the_step_after_each_save_and_the_done_line_carry_the_loops_wait(ckpt_dir):
    result = run(plain_cmd("--steps", "12", "--ckpt-every", "5", "--ckpt-dir", str(ckpt_dir)))
    assert result.returncode == 0, result.stderr[-2000:]
    steps = {int(r["step"]): r for r in result.records() if "loss" in r and "event" not in r}
    assert sorted(n for n, r in steps.items() if "ckpt_wait" in r) == [6, 11]  # after saves 5 and 10
    assert all(float(steps[n]["ckpt_wait"]) >= 0 for n in (6, 11))
    (done,) = result.events("done")
    assert float(done["ckpt_wait"]) > 0  # the final save (step 12) is waited for before done

    model = Goodput()
    t = time.time()
    for i, line in enumerate(result.stdout.splitlines()):  # a clock the lines never had: 10 ms apart
        model.feed(t + 0.01 * i, line)
    report = model.report()
    assert report.steps_kept == 12 and report.saves == 3 and report.restarts == 0
    assert report.productive > 0 and report.checkpoint_save > 0
    assert sum(s for _, s in report.parts()) == pytest.approx(report.total)


def test_each_model_preset_has_its_own_learning_rate_unless_one_is_given(tmp_path):
    assert parse_args(["--model-size", "tiny"]).lr == 0.005
    assert parse_args(["--model-size", "1gb"]).lr == 1e-5  # the tiny model's rate diverges there
    assert parse_args(["--model-size", "1gb", "--lr", "0.001"]).lr == 0.001
    assert parse_line("step=1 loss=0.5 rank=0 world=1 ckpt_wait=0.010000")["ckpt_wait"] == "0.010000"


def test_sigterm_during_a_long_step_delay_saves_the_step_at_once_and_exits(ckpt_dir):
    """A pause between steps waits on the stop: a platform's grace period (Ray's 5 s, a pod's 30 s)
    is not spent asleep, and the survivor's save of the step it is at happens in it."""
    import signal
    import subprocess

    from tests.training.conftest import REPO, env

    proc = subprocess.Popen(plain_cmd("--steps", "50", "--step-delay", "600", "--ckpt-dir", str(ckpt_dir)),
                            cwd=REPO, env=env(), stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # the first step is done: the loop now pauses for 10 minutes
            if line.startswith("step=1 "):
                break
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)  # not the 600 s pause
    finally:
        proc.kill()
    saved = [parse_line(line) for line in out.splitlines() if "event=checkpoint_saved" in line]
    assert [(s["step"], s["reason"]) for s in saved] == [("1", "sigterm")]
    assert proc.returncode != 0  # stopped, not finished
