"""A state root of layout 1 (one volume directory per claim name, one per snapshot name, jobs'
observed state in status/) brought to layout 2 at a controller's start, in-process: every claim
gets its own files, two claims of one name in two namespaces each keep what they saw, a directory
no claim names is kept aside, a snapshot moves under its content; a newer layout is refused."""

from __future__ import annotations

import pytest

from backend.errors import ClusterError
from backend.local.layout import LAYOUT_VERSION, Layout
from backend.local.migrate import migrate
from tests.controlplane import plane


def _claim(client, namespace: str) -> dict:
    claim = client.create("PersistentVolumeClaim", {
        "metadata": {"name": "checkpoints", "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    claim["spec"]["volumeName"] = f"pvc-{claim['metadata']['uid']}"  # as layout 1's controller bound it
    return client.update("PersistentVolumeClaim", claim)


def test_layout_1_moves_to_layout_2_and_loses_nothing(tmp_path):
    layout = Layout(tmp_path / "home")
    client = plane(layout.objects)
    client.create("Namespace", {"metadata": {"name": "team-b"}})
    older, newer = _claim(client, "default"), _claim(client, "team-b")
    snapshot = client.create("VolumeSnapshot", {
        "apiVersion": "snapshot.storage.k8s.io/v1", "metadata": {"name": "after-run", "namespace": "default"},
        "spec": {"source": {"persistentVolumeClaimName": "checkpoints"}}})
    snapshot["status"] = {"boundVolumeSnapshotContentName": "snapcontent-1", "readyToUse": True}
    client.update_status("VolumeSnapshot", snapshot)
    (layout.root / "status").mkdir(parents=True)
    (layout.root / "status" / "lesson-ddp.json").write_text("{}")
    (layout.volumes / "checkpoints" / "run").mkdir(parents=True)
    (layout.volumes / "checkpoints" / "run" / "ckpt-step-000005.pt").write_bytes(b"weights")
    (layout.volumes / "scratch").mkdir()
    (layout.volumes / "scratch" / "notes.txt").write_text("kept")
    (layout.snapshots / "after-run" / "data").mkdir(parents=True)
    (layout.snapshots / "after-run" / "data" / "metrics.json").write_text("{}")
    (layout.snapshots / "after-run" / "snapshot.json").write_text("{}")

    migrate(layout, client.registry.store)

    for claim in (older, newer):
        moved = layout.claim_dir(claim["metadata"]["namespace"], "checkpoints")
        assert moved == layout.volumes / claim["metadata"]["namespace"] / claim["spec"]["volumeName"]
        assert (moved / "run" / "ckpt-step-000005.pt").read_bytes() == b"weights"
    assert not (layout.volumes / "checkpoints").exists()
    assert (layout.volumes / "_unclaimed" / "scratch" / "notes.txt").read_text() == "kept"
    assert (layout.snapshot_data("default", "after-run") / "metrics.json").exists()
    assert not (layout.root / "status").exists()
    assert layout.version_file.read_text() == f"{LAYOUT_VERSION}\n"

    migrate(layout, client.registry.store)  # once at layout 2, a start moves nothing
    assert (layout.claim_dir("team-b", "checkpoints") / "run" / "ckpt-step-000005.pt").exists()


def test_a_state_root_of_a_newer_layout_is_refused(tmp_path):
    layout = Layout(tmp_path / "home")
    layout.root.mkdir(parents=True)
    layout.version_file.write_text(f"{LAYOUT_VERSION + 1}\n")
    with pytest.raises(ClusterError, match="made by a newer kfcockpit"):
        migrate(layout, plane(layout.objects).registry.store)
