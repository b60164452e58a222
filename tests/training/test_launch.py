"""The one definition of the training command line: what kubectl applies says the same, the
embedded cluster starts it warm, and training.ddp reads back the options written for it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from backend.local.node import podspec
from training.ddp import parse_args
from training.launch import DDP_MODULE, ddp_command, with_python
from training.options import option_args

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def _trainer_commands() -> dict[str, list[str]]:
    job = yaml.safe_load((MANIFESTS / "trainjob.yaml").read_text())
    runtime = yaml.safe_load((MANIFESTS / "runtime.yaml").read_text())
    (container,) = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"]["containers"]
    return {"trainjob.yaml": job["spec"]["trainer"]["command"], "runtime.yaml": container["command"]}


def test_the_committed_manifests_spell_the_training_command():
    assert _trainer_commands() == {"trainjob.yaml": ddp_command(), "runtime.yaml": ddp_command()}


def test_the_embedded_cluster_starts_the_training_command_warm():
    assert podspec.warm_target(ddp_command(args=["--steps", "3"])) == ("module", DDP_MODULE, ["--steps", "3"])


def test_training_reads_back_the_options_written_for_it(tmp_path):
    args = parse_args(option_args({"steps": 7, "ckpt_dir": tmp_path, "ckpt_every": 2, "step_delay": 0.5}))
    assert (args.steps, args.ckpt_dir, args.ckpt_every, args.step_delay) == (7, tmp_path, 2, 0.5)


def test_on_this_machine_torchrun_is_the_interpreter_given():
    command = ddp_command("--standalone", args=["--steps", "1"])
    assert with_python(command, sys.executable) == [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "-m", DDP_MODULE, "--steps", "1"]
    with pytest.raises(ValueError, match="not a torchrun command"):
        with_python(["python", "-m", DDP_MODULE], sys.executable)
