"""Checkpoints, metrics and snapshots on Kubernetes: read by a short-lived reader pod that mounts
the volume (the real `backend.kube.volume_reader` runs on real checkpoint files), snapshots taken
as CSI VolumeSnapshots and read back through a restored PVC; every pod and PVC the cockpit makes
for this is gone afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from backend.cluster import ClusterError, InvalidResource, NotFound
from backend.models import parse_manifests
from tests.kube.apiserver import InProcessApi
from tests.kube.objects import PODS
from tests.kube.volume_host import CLAIMS, VolumeHost
from training import checkpoint_format, metrics

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
STORAGE_CLASSES, SNAPSHOT_CLASSES = "StorageClass", "VolumeSnapshotClass"


def manifest(path: str):
    return parse_manifests((MANIFESTS / path).read_text(), path)


def write_checkpoint(directory: Path, step: int, loss: float, truncate: bool = False) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    payload = b"model-and-optimizer-state" * 40
    data = checkpoint_format.write_checkpoint(
        directory, {"step": step, "world_size": 2, "loss": loss, "created": time.time()}, payload)
    if truncate:
        data.write_bytes(payload[:-100])


def write_metrics(directory: Path, final_loss: float) -> None:
    metrics.write_json(directory / metrics.FILE_NAME, {
        "final_loss": final_loss, "steps": 20, "world_size": 2, "wall_seconds": 12.5, "resumes": 1,
        "loss_history": [0.9, final_loss], "launcher": "torchrun"})


@pytest.fixture
def host(api: InProcessApi, tmp_path):
    volumes = VolumeHost(api, tmp_path / "node")
    yield volumes
    volumes.join()


@pytest.fixture
async def volume(cluster, host):
    """The lesson's runtime and PVC, applied from manifests/ as a learner would."""
    for resource in manifest("runtime.yaml") + manifest("volume.yaml"):
        await cluster.apply(resource)
    return host.claim_dir("checkpoints")


def reader_pods(api: InProcessApi) -> list:
    return [r for r in api.requests_for("POST", "/api/v1/namespaces/default/pods")]


async def test_checkpoints_are_read_by_a_pod_that_is_gone_afterwards(api, cluster, host, volume):
    run = volume / "lesson-ddp"
    write_checkpoint(run, 5, 0.5)
    write_checkpoint(run, 10, 0.25)
    write_checkpoint(run, 15, 0.125, truncate=True)
    (run / ".ckpt-step-000020.pt.tmp-77").write_bytes(b"half written")
    write_metrics(run, 0.125)

    found = await cluster.checkpoints("checkpoints")

    assert [(c.path, c.run, c.step, c.world_size, c.valid) for c in found] == [
        ("lesson-ddp/ckpt-step-000005.pt", "lesson-ddp", 5, 2, True),
        ("lesson-ddp/ckpt-step-000010.pt", "lesson-ddp", 10, 2, True),
        ("lesson-ddp/ckpt-step-000015.pt", "lesson-ddp", 15, 0, False),
    ]
    assert found[1].loss == 0.25 and found[0].volume == "checkpoints"
    assert "truncated" in found[2].problem
    (created,) = reader_pods(api)
    spec = created.body["spec"]
    assert spec["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "checkpoints",
                                                                            "readOnly": True}}]
    assert spec["containers"][0]["volumeMounts"][0]["readOnly"] is True
    assert spec["containers"][0]["image"] == "kfcockpit-base:0.1.0"  # the runtime's image
    name = created.body["metadata"]["name"]
    deletes = api.requests_for("DELETE", f"/pods/{name}")
    assert len(deletes) == 1 and deletes[0].query["gracePeriodSeconds"] == "0"
    assert api.names(PODS) == []

    (run_metrics,) = await cluster.read_metrics("checkpoints")
    assert (run_metrics.run, run_metrics.final_loss, run_metrics.resumes) == ("lesson-ddp", 0.125, 1)
    assert run_metrics.written == (run / metrics.FILE_NAME).stat().st_mtime  # the loss chart draws the newest
    assert await cluster.read_metrics() == [run_metrics]  # every volume
    assert api.names(PODS) == []


async def test_unknown_volume_is_not_found(cluster, host):
    with pytest.raises(NotFound, match="checkpoints"):
        await cluster.checkpoints("checkpoints")


async def test_a_reader_that_cannot_start_says_why_and_is_removed(api, cluster, host, volume):
    host.unpullable.add("kfcockpit-base:0.1.0")
    with pytest.raises(ClusterError) as failure:
        await cluster.checkpoints("checkpoints")
    message = str(failure.value)
    assert "ImagePullBackOff" in message and "kfcockpit-base:0.1.0" in message and "\n" not in message
    assert api.names(PODS) == []


@pytest.fixture
def snapshot_classes(api):
    (csi,) = yaml.safe_load_all((MANIFESTS / "snapshots" / "storageclass.yaml").read_text())
    api.put(STORAGE_CLASSES, csi)
    (snapclass,) = yaml.safe_load_all((MANIFESTS / "snapshots" / "volumesnapshotclass.yaml").read_text())
    api.put(SNAPSHOT_CLASSES, snapclass)


async def test_snapshots_keep_what_the_volume_held(api, cluster, host, volume, snapshot_classes):
    write_checkpoint(volume / "lesson-ddp", 20, 0.5)
    write_metrics(volume / "lesson-ddp", 0.5)
    first = await cluster.snapshot("checkpoints", "run-a")
    assert (first.name, first.volume, first.ready) == ("run-a", "checkpoints", True)
    # a checkpoint (data + sidecar) and metrics.json
    assert first.files == 3 and [m.final_loss for m in first.metrics] == [0.5]

    write_metrics(volume / "lesson-ddp", 0.25)  # the next run overwrites the volume
    second = await cluster.snapshot("checkpoints", "run-b")
    assert [m.final_loss for m in second.metrics] == [0.25]

    listed = await cluster.snapshots()
    assert [(s.name, s.ready, [m.final_loss for m in s.metrics]) for s in listed] == [
        ("run-a", True, [0.5]), ("run-b", True, [0.25])]
    posted = api.requests_for("POST", "/volumesnapshots")
    assert posted[0].body["spec"] == {"source": {"persistentVolumeClaimName": "checkpoints"},
                                      "volumeSnapshotClassName": "csi-hostpath-snapclass"}

    # Read back through a PVC restored from each snapshot: the snapshot's content, not the volume's.
    (from_a,) = await cluster.read_metrics(snapshot="run-a")
    (from_b,) = await cluster.read_metrics(snapshot="run-b")
    assert (from_a.final_loss, from_b.final_loss) == (0.5, 0.25)
    assert from_a.loss_history == [0.9, 0.5]
    restores = [r.body for r in api.requests_for("POST", "/persistentvolumeclaims")][1:]
    assert [r["spec"]["dataSource"] for r in restores] == [
        {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "run-a"},
        {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "run-b"}]
    assert api.names(CLAIMS) == ["checkpoints"] and api.names(PODS) == []

    with pytest.raises(InvalidResource, match="already exists"):
        await cluster.snapshot("checkpoints", "run-a")
    with pytest.raises(InvalidResource, match="not a valid name"):
        await cluster.snapshot("checkpoints", "Run_A")


async def test_a_volume_of_a_class_without_snapshots_says_so(api, cluster, host, volume):
    # the lesson's volume names the class nfs-csi: its driver installed, its snapshot class not
    api.put(STORAGE_CLASSES, {"metadata": {"name": "nfs-csi"}, "provisioner": "nfs.csi.k8s.io"})
    api.put(SNAPSHOT_CLASSES, {"metadata": {"name": "csi-hostpath-snapclass"}, "driver": "hostpath.csi.k8s.io",
                               "deletionPolicy": "Delete"})
    with pytest.raises(ClusterError) as failure:
        await cluster.snapshot("checkpoints", "run-a")
    message = str(failure.value)
    assert "cannot be snapshotted" in message and "nfs.csi.k8s.io of StorageClass nfs-csi" in message
    assert "install.sh nfs" in message and "\n" not in message
    assert api.requests_for("POST", "/volumesnapshots") == []
