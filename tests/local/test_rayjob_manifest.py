"""manifests/rayjob.yaml against the RayJob fields the cockpit models, and how the embedded cluster
plans a RayJob (no Ray started here): driver command and env, mounts, names, refusals in one line,
a driver that fails before starting Ray."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from backend.cluster import InvalidResource
from backend.local.controllers.rayjob import driver_pod
from backend.local.node.raypods import split_prefix
from backend.local.registry.strategies import rayjobs as rayplan
from backend.models import (
    DRIVER_RANK,
    RAY_API,
    JobPhase,
    ManifestError,
    PodPhase,
    RayJob,
    parse_manifests,
    unknown_fields,
)
from tests.local.conftest import MANIFESTS, WAIT, cli, embedded_cluster, kubectl


def _raw() -> dict:
    return yaml.safe_load((MANIFESTS / "rayjob.yaml").read_text())


def _job(**spec_changes) -> RayJob:
    data = _raw()
    data["spec"].update(spec_changes)
    (job,) = parse_manifests(yaml.safe_dump(data))
    return job


def test_the_lesson_rayjob_has_the_kuberay_v1_shape():
    (job,) = parse_manifests((MANIFESTS / "rayjob.yaml").read_text())
    assert isinstance(job, RayJob) and job.api_version == RAY_API == "ray.io/v1"
    assert unknown_fields(job) == []  # every field it sets is one the cockpit models
    raw = _raw()["spec"]["rayClusterSpec"]
    # what KubeRay's v1 types require (json tags without omitempty): rayStartParams, template,
    # groupName, and a named container with an image in each pod template
    groups = [raw["headGroupSpec"]] + raw["workerGroupSpecs"]
    for group in groups:
        assert isinstance(group["rayStartParams"], dict)
        (container,) = group["template"]["spec"]["containers"]
        assert container["name"] and container["image"] == "kfcockpit-base:0.1.0"
        # Ray Train's storage must be seen from every node: head and workers mount the same claim
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in group["template"]["spec"]["volumes"]}
        assert [(claims[n], p) for n, p in mounts.items()] == [("checkpoints", "/checkpoints")]
    groups = raw["workerGroupSpecs"]
    assert all(g["groupName"] and g["minReplicas"] <= g["replicas"] <= g["maxReplicas"] for g in groups)
    assert sum(g["replicas"] for g in raw["workerGroupSpecs"]) == 2
    # the two-worker Ray Train run of the lesson, storing under the mounted volume
    argv = rayplan.split_entrypoint(job.metadata.name, job.spec.entrypoint)
    assert argv[:3] == ["python", "-m", "training.ray_train"]
    assert argv[argv.index("--num-workers") + 1] == "2"
    assert argv[argv.index("--storage") + 1].startswith("/checkpoints/")
    assert job.volume_mounts() == [("checkpoints", "/checkpoints")]


def test_a_rayjob_plans_a_driver_pod_with_the_head_env_and_mounts():
    entrypoint = ("python -m training.ray_train --num-workers 3 --max-failures=1 --storage /checkpoints/run "
                  "--temp-dir=/checkpoints/t")
    job = _job(entrypoint=entrypoint)
    plan = rayplan.plan_rayjob(job)
    assert (plan.num_workers, plan.max_failures) == (3, 1)
    assert plan.env == {"OMP_NUM_THREADS": "1"}  # runtimeEnvYAML env_vars
    raw = job.to_manifest()
    raw["metadata"].update(uid="u-1", namespace="default")
    pod = driver_pod(raw)
    (container,) = pod["spec"]["containers"]
    assert container["command"][-3:] == ["--storage", "/checkpoints/run", "--temp-dir=/checkpoints/t"]
    assert container["image"] == "kfcockpit-base:0.1.0" and {"name": "OMP_NUM_THREADS", "value": "1"} in \
        container["env"]
    assert container["volumeMounts"] == [{"name": "checkpoints", "mountPath": "/checkpoints"}]
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "checkpoints"
    assert pod["metadata"]["generateName"] == "lesson-ray-driver-" and pod["spec"]["restartPolicy"] == "Never"
    assert pod["metadata"]["annotations"]["kfcockpit.io/ray-workers"] == "3"
    other = rayplan.plan_rayjob(_job(entrypoint="python my_driver.py"))
    assert (other.num_workers, other.max_failures) == (0, 0)  # not training.ray_train: workers as they come


def test_worker_lines_are_told_apart_by_the_pid_ray_prefixes_them_with():
    assert split_prefix(b"(RayTrainWorker pid=4242) step=3 loss=0.5 rank=1 world=2") == \
        (4242, b"step=3 loss=0.5 rank=1 world=2")
    assert split_prefix(b"(pid=17, ip=10.0.0.2) hello") == (17, b"hello")
    assert split_prefix(b"(TrainController pid=9) - (ip=127.0.0.1, pid=12) world_rank=0") == \
        (9, b"- (ip=127.0.0.1, pid=12) world_rank=0")
    assert split_prefix(b"event=ray_started seconds=5.1") == (None, b"event=ray_started seconds=5.1")
    assert split_prefix(b"(raylet) A worker died") == (None, b"(raylet) A worker died")


@pytest.mark.parametrize("change, message", [
    ({"entrypoint": "python -m training.ray_train | tee out"}, "without a shell; write it as one command (found '|')"),
    ({"entrypoint": "python -m training.ray_train --num-workers two"}, "--num-workers 'two' is not a whole number"),
    ({"entrypoint": "python 'unclosed"}, "entrypoint cannot be split into words"),
    ({"rayClusterSpec": None, "clusterSelector": {"ray.io/cluster": "shared"}}, "the embedded cluster does not have"),
])
def test_what_the_embedded_cluster_cannot_run_is_refused_in_one_line(change, message):
    with pytest.raises(InvalidResource, match=re.escape(message)):
        rayplan.plan_rayjob(_job(**change))


@pytest.mark.parametrize("change, message", [
    ({"rayClusterSpec": None}, "spec: one of rayClusterSpec or clusterSelector is required"),
    ({"entrypoint": "  "}, "spec.entrypoint: entrypoint is empty"),
    ({"runtimeEnvYAML": "- a list"}, "spec.runtimeEnvYAML: runtimeEnvYAML must be a mapping"),
])
def test_a_malformed_rayjob_is_a_manifest_error(change, message):
    with pytest.raises(ManifestError, match=re.escape(message)):
        _job(**change)


def test_the_cli_refuses_a_rayjob_it_cannot_run_in_one_line_exit_2(home, tmp_path):
    data = _raw()
    data["spec"]["entrypoint"] = "python -m training.ray_train && echo done"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    try:
        assert cli(home, "cluster", "up").returncode == 0
        result = kubectl(home, "apply", "-f", str(MANIFESTS / "volume.yaml"), "-f", str(bad))
        assert result.returncode == 1 and "Traceback" not in result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.endswith(  # as the API server says it
            'RayJob.ray.io "lesson-ray" is invalid: RayJob lesson-ray: the embedded cluster runs the '
            "entrypoint without a shell; write it as one command (found '&&')")
        lost = kubectl(home, "get", "rayjobs,pods")
        assert lost.returncode == 0 and "lesson-ray" not in lost.stdout  # nothing was created
    finally:
        cli(home, "cluster", "down")


async def test_a_driver_that_refuses_its_arguments_fails_the_job_with_its_error_line():
    home = Path(tempfile.mkdtemp(prefix="kfr-", dir="/tmp"))  # short: RayJobs need it for Ray's sockets
    try:
        async with embedded_cluster(home) as cluster:
            await cluster.apply(parse_manifests((MANIFESTS / "volume.yaml").read_text())[0])
            await cluster.apply(_job(entrypoint="python -m training.ray_train --steps 0 --storage /checkpoints/x"))
            job = await cluster.wait_job("lesson-ray", frozenset({JobPhase.FAILED}), WAIT)
            assert (job.phase, job.reason, job.launcher) == (JobPhase.FAILED, "AppFailed", "ray")
            assert job.message.endswith("exited with code 2: training.ray_train: error: --steps must be at least 1, "
                                        "got 0")
            (driver,) = await cluster.list_pods("lesson-ray")  # Ray never started: no worker pods
            assert (driver.rank, driver.phase, driver.exit_code) == (DRIVER_RANK, PodPhase.FAILED, 2)
    finally:
        shutil.rmtree(home, ignore_errors=True)
