"""Every object the project ships, and the upstream example it runs, is admitted as upstream
admits it (so the embedded cluster refuses none of them, and a real cluster would not either):
manifests/*.yaml, manifests/snapshots, manifests/embedded (what installing the Trainer gives),
tests/conformance/data/01-multi-node.yaml (kubeflow/trainer v2.3.0 examples/yaml), and the
TrainJob the pipeline's task applies."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from backend.local.registry import crds
from tests.registry.crds.conftest import REPO

SHIPPED = ["manifests/runtime.yaml", "manifests/volume.yaml", "manifests/trainjob.yaml", "manifests/trainjob-gpu.yaml",
           "manifests/rayjob.yaml",
           "manifests/snapshots/volumesnapshot.yaml", "manifests/snapshots/volumesnapshotclass.yaml",
           "manifests/nfs/storageclass.yaml",
           "manifests/embedded/torch-distributed.yaml", "tests/conformance/data/01-multi-node.yaml"]


def _documents(path: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((REPO / path).read_text()) if d]


@pytest.mark.parametrize("path", SHIPPED)
def test_shipped_objects_are_admitted_without_unknown_fields(cluster, path):
    for obj in _documents(path):
        if obj["kind"] not in crds.KINDS:
            continue
        if obj["kind"] not in ("ClusterTrainingRuntime", "VolumeSnapshotClass"):
            obj["metadata"]["namespace"] = "default"
        assert crds.unknown_fields(obj["kind"], obj) == []
        assert cluster.admit(obj) == []
        cluster.put(obj)


def test_every_manifest_is_covered():
    shipped = {str(p.relative_to(REPO)) for p in Path(REPO / "manifests").rglob("*.yaml")
               if any(d and d.get("kind") in crds.KINDS for d in yaml.safe_load_all(p.read_text()))}
    assert shipped <= set(SHIPPED)


def test_the_pipeline_task_trainjob_is_admitted(cluster):
    from backend.pipelines.task_runtime import lesson_trainjob

    job = lesson_trainjob("pipe-job", "checkpoints", num_nodes=2, steps=3, ckpt_every=1, step_delay=0,
                          resources={"requests": {"cpu": "1", "memory": "1Gi"}}, node_selector={"zone": "a"})
    obj = job.to_manifest()
    obj["metadata"]["namespace"] = "default"
    assert crds.unknown_fields("TrainJob", obj) == []
    assert cluster.admit(obj) == []
