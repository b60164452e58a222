"""The CSI provisioner and the snapshot controller in-process (kubernetes-csi external-provisioner
and external-snapshotter v8): a claim is provisioned into a directory of its own and Bound; a
snapshot naming a class that does not exist is not ready and says why in the snapshot
controller's words (getCreateSnapshotInput), and is taken once the class appears; the content is
bound to the snapshot and restores start from its files."""

from __future__ import annotations

from pathlib import Path

from backend.local.controllers.snapshots import Snapshotter
from backend.local.controllers.volumes import DRIVER, Provisioner
from backend.local.registry.events import Events
from tests.controlplane import plane, running, until

GROUP = "snapshot.storage.k8s.io"


async def _cp(argv: list[str], output: Path) -> int:
    import asyncio

    proc = await asyncio.create_subprocess_exec(*argv)
    return await proc.wait()


def _bound(claim: dict | None) -> bool:
    return claim is not None and (claim.get("status") or {}).get("phase") == "Bound"


async def test_a_snapshot_of_a_missing_class_is_not_ready_and_says_why_until_the_class_exists(tmp_path):
    client = plane()
    client.create("StorageClass", {"metadata": {"name": "standard", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": DRIVER, "reclaimPolicy": "Delete"})
    events = Events(client, host="test")
    volumes, snapshots = tmp_path / "volumes", tmp_path / "snapshots"
    controllers = (Provisioner(client, events.recorder(DRIVER), volumes, snapshots, _cp),
                   Snapshotter(client, events.recorder("snapshot-controller"), snapshots, volumes))
    async with running(*controllers):
        client.create("PersistentVolumeClaim", {"metadata": {"name": "data", "namespace": "default"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        claim = await until(client, "PersistentVolumeClaim", "default", "data", _bound)
        (volumes / "default" / claim["spec"]["volumeName"] / "metrics.json").write_text("{}")

        client.create("VolumeSnapshot", {
            "apiVersion": f"{GROUP}/v1", "metadata": {"name": "snap", "namespace": "default"},
            "spec": {"volumeSnapshotClassName": "no-such-class", "source": {"persistentVolumeClaimName": "data"}}})
        failed = await until(client, "VolumeSnapshot", "default", "snap",
                             lambda o: bool(((o or {}).get("status") or {}).get("error")))
        assert failed["status"]["readyToUse"] is False
        assert failed["status"]["error"]["message"] == (
            "Failed to create snapshot content with error failed to get input parameters to create snapshot snap: "
            f'"volumesnapshotclass.{GROUP} \\"no-such-class\\" not found"')
        warned = [e for e in client.list("Event", "default") if e["involvedObject"]["name"] == "snap"]
        assert [e["reason"] for e in warned] == ["SnapshotContentCreationFailed"]
        assert client.list("VolumeSnapshotContent") == []

        client.create("VolumeSnapshotClass", {"apiVersion": f"{GROUP}/v1", "metadata": {"name": "no-such-class"},
                                              "driver": DRIVER, "deletionPolicy": "Delete"})
        ready = await until(client, "VolumeSnapshot", "default", "snap",
                            lambda o: ((o or {}).get("status") or {}).get("readyToUse") is True)
        content = ready["status"]["boundVolumeSnapshotContentName"]
        assert client.get("VolumeSnapshotContent", None, content)["spec"]["volumeSnapshotRef"]["name"] == "snap"
        assert (snapshots / content / "data" / "metrics.json").exists()

        client.create("PersistentVolumeClaim", {"metadata": {"name": "restored", "namespace": "default"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "dataSource": {"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": "snap"}}})
        restored = await until(client, "PersistentVolumeClaim", "default", "restored", _bound)
        assert (volumes / "default" / restored["spec"]["volumeName"] / "metrics.json").read_text() == "{}"
