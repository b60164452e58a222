"""Declared resources: the lesson's manifests parse, bad ones fail in one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.models import ManifestError, TrainJob, TrainingRuntime, parse_manifests

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"

JOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: NAME}
spec:
  runtimeRef: {name: kfcockpit-torch}
  trainer: {numNodes: NODES}
"""


def test_the_lesson_manifests_parse_with_their_mount_and_failure_policy():
    (job,) = parse_manifests((MANIFESTS / "trainjob.yaml").read_text())
    (runtime,) = parse_manifests((MANIFESTS / "runtime.yaml").read_text())
    assert isinstance(job, TrainJob) and isinstance(runtime, TrainingRuntime)
    assert job.spec.trainer.num_nodes == 2
    assert job.volume_mounts() == [("checkpoints", "/checkpoints")]
    assert runtime.max_restarts() == 3
    assert runtime.trainer_container()["image"] == "kfcockpit-base:0.1.0"


def test_unknown_fields_survive_a_round_trip():
    text = JOB.replace("NAME", "a").replace("NODES", "2") + "  suspend: false\n  managedBy: someone\n"
    (job,) = parse_manifests(text)
    out = job.to_manifest()
    assert out["spec"]["managedBy"] == "someone" and out["spec"]["suspend"] is False
    assert "command" not in out["spec"]["trainer"]  # empty defaults are not written back


@pytest.mark.parametrize(
    "text, message",
    [
        (JOB.replace("NAME", "ok").replace("NODES", "0"),
         "x.yaml (document 1): TrainJob ok: spec.trainer.numNodes: numNodes must be at least 1, got 0"),
        (JOB.replace("NAME", "Bad_Name").replace("NODES", "2"),
         "x.yaml (document 1): TrainJob Bad_Name: metadata.name: metadata.name 'Bad_Name' is not a valid name"),
        ("kind: Pod\nmetadata: {name: p}\n", "x.yaml (document 1): unsupported kind 'Pod'"),
        ("a: [1,\n", "x.yaml: not valid YAML at line 2"),
        ("", "x.yaml: no documents"),
        ("- just\n- a list\n", "x.yaml (document 1): expected a mapping"),
    ],
)
def test_bad_manifests_fail_in_one_line(text, message):
    with pytest.raises(ManifestError) as caught:
        parse_manifests(text, "x.yaml")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)
