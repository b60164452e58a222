"""How a pod's container becomes a process: pure rules, no processes (node/podspec.py)."""

from __future__ import annotations

import pytest

from backend.errors import InvalidResource
from backend.local.layout import Layout
from backend.local.node import podspec


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


def test_a_warm_worker_gets_what_torchrun_gives_its_one_worker_from_the_nodes_pet_variables():
    env = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "127.0.0.1",
           "PET_MASTER_PORT": "20001", "OMP_NUM_THREADS": "1"}
    spec = podspec.launch_spec(["torchrun", "-m", "training.ddp", "--steps", "3"], env, warm_allowed=True)
    assert spec.warm == ("module", "training.ddp", ["--steps", "3"])
    assert (spec.warm_env["RANK"], spec.warm_env["WORLD_SIZE"], spec.warm_env["LOCAL_RANK"]) == ("1", "2", "0")
    assert spec.warm_env["MASTER_PORT"] == "20001" and ("OMP_NUM_THREADS", "1") in spec.zygote_key
    several = podspec.launch_spec(spec.argv, dict(env, PET_NPROC_PER_NODE="4"), warm_allowed=True)
    assert several.warm is None  # torchrun starts several workers itself: run as is
    assert podspec.launch_spec(spec.argv, env, warm_allowed=False).warm is None


def test_environment_references():
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": {"i": "3"}}, "spec": {}}
    container = {"env": [{"name": "A", "value": "a"}, {"name": "B", "value": "$(A)-$$(A)-$(MISSING)"},
                         {"name": "IDX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['i']"}}},
                         {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}],
                 "envFrom": [{"prefix": "X_", "secretRef": {"name": "s"}}]}
    data = {("ConfigMap", "cm"): {"k": "v"}, ("Secret", "s"): {"k": "secret"}}
    env = podspec.container_env(container, pod, lambda kind, name: data.get((kind, name)))
    assert env == {"X_k": "secret", "A": "a", "B": "a-$(A)-$(MISSING)", "IDX": "3", "C": "v"}
    with pytest.raises(InvalidResource, match="configmap 'cm' not found"):
        podspec.container_env(container, pod, lambda kind, name: None if kind == "ConfigMap" else {})


def test_volume_names_cannot_reach_outside_the_state_root(tmp_path):
    layout = Layout(tmp_path / "home")
    layout.create()
    (layout.volumes / "planted").symlink_to(tmp_path)  # a link someone put in the state root
    for namespace, name in (("default", "../../etc"), ("default", "/etc"), ("default", "a/b"), ("planted", "x")):
        with pytest.raises(InvalidResource):
            layout.volume_dir(namespace, name)
    assert layout.volume_dir("default", "pvc-1") == layout.volumes.resolve() / "default" / "pvc-1"
