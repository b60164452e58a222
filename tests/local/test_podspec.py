"""How a TrainJob becomes pod processes, and how watches resume: pure rules, no processes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backend.cluster import InvalidResource
from backend.local import podspec
from tests.local.conftest import lesson_job, lesson_resources


def test_the_lesson_job_plans_as_the_trainer_would():
    runtime, _volume = lesson_resources()
    plan = podspec.plan_job(lesson_job(), runtime)
    assert (plan.num_nodes, plan.num_proc_per_node, plan.max_restarts) == (2, 1, 3)
    assert plan.command == ["torchrun", "-m", "training.ddp"]
    assert plan.env["OMP_NUM_THREADS"] == "1" and plan.mounts == [("checkpoints", "/checkpoints")]

    spec = podspec.launch_spec(plan, 1, 29500, "pod-x", Path("/state/cluster"),
                               {"/checkpoints": "/state/cluster/volumes/checkpoints"})
    assert spec.argv[spec.argv.index("--ckpt-dir") + 1] == "/state/cluster/volumes/checkpoints/lesson-ddp"
    assert {k: spec.env[k] for k in ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                                     "PET_MASTER_PORT")} == {
        "PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": "29500"}
    assert spec.env["PATH"].split(":")[0] == podspec.VENV_BIN
    assert spec.warm == ("module", "training.ddp", spec.argv[3:])
    assert (spec.warm_env["RANK"], spec.warm_env["WORLD_SIZE"], spec.warm_env["LOCAL_RANK"]) == ("1", "2", "0")


def test_pod_names_follow_jobset():
    assert re.fullmatch(r"job-node-0-3-[a-z0-9]{5}", podspec.pod_name("job", 3))
    assert podspec.pod_name("job", 0) != podspec.pod_name("job", 0)


@pytest.mark.parametrize("value, expected", [
    ("/checkpoints", "/v"),
    ("/checkpoints/run", "/v/run"),
    ("--ckpt-dir=/checkpoints/run", "--ckpt-dir=/v/run"),
    ("/a:/checkpoints", "/a:/v"),
    ("/checkpointsX", "/checkpointsX"),
    ("/other/checkpoints", "/other/checkpoints"),
])
def test_mount_paths_are_rewritten_as_whole_path_prefixes(value, expected):
    assert podspec.rewrite_mounts(value, {"/checkpoints": "/v"}) == expected


@pytest.mark.parametrize("argv, target", [
    (["torchrun", "-m", "training.ddp", "--steps", "3"], ("module", "training.ddp", ["--steps", "3"])),
    (["/venv/bin/torchrun", "train.py", "x"], ("script", "train.py", ["x"])),
    (["torchrun", "--nproc-per-node", "2", "-m", "m"], None),  # torchrun options: run it as is
    (["python", "-m", "training.ddp"], None),
])
def test_only_plain_torchrun_commands_start_warm(argv, target):
    assert podspec.warm_target(argv) == target


def test_a_job_name_too_long_for_its_pod_names_is_refused():
    runtime, _ = lesson_resources()
    with pytest.raises(InvalidResource, match="name too long"):
        podspec.plan_job(lesson_job("a" * 55), runtime)


def test_volume_names_cannot_reach_outside_the_state_root(tmp_path):
    from backend.local.layout import Layout

    layout = Layout(tmp_path / "home")
    layout.create()
    (layout.volumes / "planted").symlink_to(tmp_path)  # a link someone put in the state root
    for name in ("../../etc", "/etc", "a/b", "planted"):
        with pytest.raises(InvalidResource):
            layout.volume_dir(name)
    assert layout.volume_dir("checkpoints") == layout.volumes.resolve() / "checkpoints"
