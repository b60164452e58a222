"""The compiled pipeline: byte-stable, committed and current, carrying its platform settings."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from backend.pipelines.compiled import COMPILED_FILES, compile_pipeline, load_compiled
from backend.pipelines.images import BASE_IMAGE
from backend.pipelines.platform import CONTROL, MOUNT_PATH, NODE_SELECTOR, PULL_POLICY, RAY_TASK, WORKER


def _docs(path: Path) -> tuple[dict, dict]:
    """(pipeline spec, Kubernetes platform spec) — the two YAML documents of a compiled file."""
    spec, platform = list(yaml.safe_load_all(path.read_text()))
    return spec, platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


@pytest.mark.parametrize("target", ["kube", "local"])
def test_compiling_twice_gives_the_same_bytes_as_the_committed_file(tmp_path, target):
    first = compile_pipeline(tmp_path / "a.yaml", "lesson", target).read_bytes()
    second = compile_pipeline(tmp_path / "b.yaml", "lesson", target).read_bytes()
    assert first == second
    assert COMPILED_FILES[target].read_bytes() == first, (
        f"{COMPILED_FILES[target]} is not what the definition compiles to: run `kfcockpit pipeline compile`")


def test_the_compile_command_gives_the_same_bytes_in_fresh_processes(tmp_path):
    """Two `kfcockpit pipeline compile` processes with different hash seeds: no set or dict
    ordering, timestamp or path leaks into the file."""
    outputs = []
    for seed in ("0", "4242"):
        out = tmp_path / seed / "pipeline.yaml"
        subprocess.run([str(Path(sys.executable).parent / "kfcockpit"), "pipeline", "compile", "-O", str(out)],
                       env=dict(os.environ, PYTHONHASHSEED=seed), check=True, capture_output=True, timeout=120)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == COMPILED_FILES["kube"].read_bytes()


def test_the_cluster_pipeline_declares_its_platform_settings():
    spec, platform = _docs(COMPILED_FILES["kube"])
    executors = spec["deploymentSpec"]["executors"]
    tasks = spec["root"]["dag"]["tasks"]

    # The volume: kfp-kubernetes CreatePVC, a fresh claim per run, of a snapshot-capable class.
    volume = tasks["createpvc"]["inputs"]["parameters"]
    assert volume["pvc_name_suffix"]["runtimeValue"]["constant"] == "-checkpoints"
    assert volume["storage_class_name"]["componentInputParameter"] == "storage_class"
    assert executors["exec-createpvc"]["container"]["image"] == "argostub/createpvc"

    # Every task that touches checkpoints mounts the claim CreatePVC made, at the workers' path.
    mounting = {"exec-train-job", "exec-train-job-2", "exec-list-checkpoints", "exec-ray-train"}
    for executor in mounting:
        [mount] = platform[executor]["pvcMount"]
        assert mount["mountPath"] == MOUNT_PATH
        assert mount["pvcNameParameter"]["taskOutputParameter"] == {"producerTask": "createpvc",
                                                                    "outputParameterKey": "name"}
    assert {e for e, p in platform.items() if "pvcMount" in p} == mounting

    # Node selector and pull policy on every component's pod; requests and limits on its container.
    components = set(executors) - {"exec-createpvc"}
    assert set(platform) == components
    for executor in components:
        assert platform[executor]["nodeSelector"] == {"labels": NODE_SELECTOR}
        assert platform[executor]["imagePullPolicy"] == PULL_POLICY
        container = executors[executor]["container"]
        assert container["image"] == BASE_IMAGE
        wanted = RAY_TASK if executor == "exec-ray-train" else CONTROL
        assert {k: container["resources"][k] for k in ("resourceCpuRequest", "resourceCpuLimit",
                                                       "resourceMemoryRequest", "resourceMemoryLimit")} == {
            "resourceCpuRequest": wanted.cpu_request, "resourceCpuLimit": wanted.cpu_limit,
            "resourceMemoryRequest": wanted.memory_request, "resourceMemoryLimit": wanted.memory_limit}
        # The pinned image holds everything: no task installs a package when it starts.
        assert not any("pip install" in part for part in container["command"] + container["args"])

    # The TrainJob's workers get the worker resources (a CPU request where a GPU would be) and the
    # node selector, as constants in the definition.
    for task in ("train-job", "train-job-2"):
        params = tasks[task]["inputs"]["parameters"]
        assert params["resources"]["runtimeValue"]["constant"] == WORKER.as_k8s()
        assert params["node_selector"]["runtimeValue"]["constant"] == NODE_SELECTOR


def _rename(value, old: str, new: str):
    if isinstance(value, dict):
        return {k.replace(old, new): _rename(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, old, new) for v in value]
    return value.replace(old, new) if isinstance(value, str) else value


def test_the_local_pipeline_differs_only_in_its_volume_task():
    kube_spec, kube_platform = _docs(COMPILED_FILES["kube"])
    local_spec, local_platform = _docs(COMPILED_FILES["local"])

    # Same task inputs for the volume task (CreatePVC's), its own lightweight executor.
    assert (local_spec["root"]["dag"]["tasks"]["create-volume"]["inputs"]
            == kube_spec["root"]["dag"]["tasks"]["createpvc"]["inputs"])
    assert "kfp.dsl.executor_main" in str(local_spec["deploymentSpec"]["executors"]["exec-create-volume"])

    # Everything else is identical once the volume task's name is aligned.
    def without_volume(spec: dict, name: str) -> dict:
        spec = copy.deepcopy(spec)
        del spec["components"][f"comp-{name}"], spec["deploymentSpec"]["executors"][f"exec-{name}"]
        del spec["root"]["dag"]["tasks"][name]
        return _rename(spec, name, "VOLUME")

    assert without_volume(local_spec, "create-volume") == without_volume(kube_spec, "createpvc")
    assert _rename(local_platform, "create-volume", "VOLUME") == _rename(kube_platform, "createpvc", "VOLUME")
    assert load_compiled(COMPILED_FILES["local"]).runs_locally
    assert load_compiled(COMPILED_FILES["kube"]).container_executors == ["exec-createpvc"]


def test_only_the_step_8_ray_component_declares_packages_to_install(tmp_path):
    ray = yaml.safe_load(compile_pipeline(tmp_path / "ray.yaml", "ray", "local").read_text().split("\n---\n")[0])
    command = " ".join(ray["deploymentSpec"]["executors"]["exec-ray-train"]["container"]["command"])
    assert "pip install" in command and "ray[train]==" in command
    lesson, _ = _docs(COMPILED_FILES["local"])
    assert "pip install" not in str(lesson["deploymentSpec"]["executors"]["exec-ray-train"])
