"""Bad input through the CLI: one line on stderr, exit 2, nothing started, nothing lost."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.local.conftest import MANIFESTS, cli, lesson_job

NO_NODES = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: no-nodes}
spec:
  runtimeRef: {name: kfcockpit-torch}
  trainer: {numNodes: 0, command: [torchrun, -m, training.ddp]}
"""


def _write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


@pytest.fixture
def ready_home(home, cluster):
    """A state root with the lesson's runtime and volume applied, and a file on the volume."""
    for name in ("runtime.yaml", "volume.yaml"):
        assert cli(home, "apply", "-f", str(MANIFESTS / name)).returncode == 0
    precious = cluster.embedded.layout.volume_dir("checkpoints") / "precious.txt"
    precious.write_text("keep me")
    return home


def _cases(tmp_path):
    unknown_runtime = lesson_job("orphan").to_manifest()
    unknown_runtime["spec"]["runtimeRef"]["name"] = "no-such-runtime"
    bad_name = lesson_job().to_manifest()
    bad_name["metadata"]["name"] = "Bad_Name"
    unknown_volume = lesson_job("no-volume").to_manifest()
    claims = unknown_volume["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    claims["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"][
        "claimName"] = "no-such-volume"
    long_name = lesson_job().to_manifest()
    long_name["metadata"]["name"] = "a" * 60
    return [
        (["apply", "-f", _write(tmp_path, "nodes.yaml", NO_NODES)], "numNodes must be at least 1"),
        (["apply", "-f", _write(tmp_path, "runtime.yaml", unknown_runtime)], 'trainingruntimes.trainer.kubeflow.org "no-such-runtime" not found'),
        (["apply", "-f", _write(tmp_path, "name.yaml", bad_name)], "is not a valid name"),
        (["apply", "-f", _write(tmp_path, "volume.yaml", unknown_volume)], "'no-such-volume' not found"),
        (["apply", "-f", _write(tmp_path, "long.yaml", long_name)], "name too long"),
        (["apply", "-f", str(tmp_path / "missing.yaml")], "cannot read"),
        (["delete", "pod", "no-such-pod"], "Pod no-such-pod: not found in namespace default"),
        # refused, but as a list: the kube backend puts the name in the URL unchecked and the server resolves ".."
        (["checkpoints", "../../etc"], "the cluster has no persistentvolumeclaims"),
        (["checkpoints", "no-such-volume"], "PersistentVolumeClaim no-such-volume: not found"),
        (["snapshot", "create", "no-such-volume", "snap"], "PersistentVolumeClaim no-such-volume: not found"),
        (["snapshot", "create", "checkpoints", "../escape"], "is not a valid name"),
        (["logs", "no-such-job"], "TrainJob no-such-job: not found"),
        (["wait", "trainjob", "no-such-job", "--timeout", "5"], "TrainJob no-such-job: not found"),
        (["get", "widgets"], "cannot get 'widgets'"),
        (["delete", "pvc", "no-such-volume"], "not found"),
    ]


def test_bad_input_exits_2_with_one_line_and_starts_nothing(ready_home, tmp_path):
    for args, message in _cases(tmp_path):
        result = cli(ready_home, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("kfcockpit: ") and result.stderr.count("\n") == 1, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr

    jobs = cli(ready_home, "get", "trainjobs", "-o", "json")
    pods = cli(ready_home, "get", "pods", "-o", "json")
    assert json.loads(jobs.stdout) == [] and json.loads(pods.stdout) == []
    volume = ready_home / "cluster" / "volumes" / "checkpoints" / "precious.txt"
    assert volume.read_text() == "keep me"
