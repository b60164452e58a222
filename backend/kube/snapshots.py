"""CSI VolumeSnapshots (snapshot.storage.k8s.io/v1) of checkpoint volumes, and the temporary
PVC that restores one so the reader pod can look inside it.

A snapshot needs a VolumeSnapshotClass whose driver is the provisioner of the volume's
StorageClass (kind's default `standard` class has none; csi-hostpath has): the class is picked
by that rule, unless one is marked default.
"""

from __future__ import annotations

from backend.kube.pods import parse_time
from backend.models import SNAPSHOT_API, ObjectMeta, Snapshot, SnapshotSource, VolumeSnapshot, VolumeSnapshotSpec

DEFAULT_CLASS_ANNOTATION = "snapshot.storage.kubernetes.io/is-default-class"
DEFAULT_STORAGE_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
SNAPSHOT_LABELS = {"app.kubernetes.io/part-of": "kfcockpit"}


def quantity_bytes(value: str | int | None) -> int:
    if value in (None, ""):
        return 0
    from kubernetes.utils.quantity import parse_quantity

    try:
        return int(parse_quantity(value))
    except ValueError:
        return 0


def snapshot_manifest(volume: str, name: str, class_name: str | None) -> dict:
    return VolumeSnapshot(
        metadata=ObjectMeta(name=name, labels=dict(SNAPSHOT_LABELS)),
        spec=VolumeSnapshotSpec(source=SnapshotSource(persistent_volume_claim_name=volume),
                                volume_snapshot_class_name=class_name),
    ).to_manifest()


def snapshot_from(raw: dict) -> Snapshot:
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    source = ((raw.get("spec") or {}).get("source") or {})
    return Snapshot(
        name=meta.get("name", ""),
        volume=source.get("persistentVolumeClaimName") or source.get("volumeSnapshotContentName") or "",
        created=parse_time(status.get("creationTime")) or parse_time(meta.get("creationTimestamp")) or 0.0,
        ready=bool(status.get("readyToUse")),
        size_bytes=quantity_bytes(status.get("restoreSize")),
    )


def snapshot_error(raw: dict) -> str:
    """The snapshot controller's error message, or ''."""
    return " ".join(str(((raw.get("status") or {}).get("error") or {}).get("message") or "").split())


def is_default(obj: dict, annotation: str) -> bool:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(annotation) == "true"


def pick_class(classes: list[dict], driver: str | None) -> str | None:
    """The VolumeSnapshotClass for a volume provisioned by `driver` (any driver when unknown),
    preferring one marked default; None when there is none."""
    matching = [c for c in classes if not driver or c.get("driver") == driver]
    matching.sort(key=lambda c: not is_default(c, DEFAULT_CLASS_ANNOTATION))
    return matching[0]["metadata"]["name"] if matching else None


def restore_claim(name: str, snapshot: dict, source_claim: dict | None) -> dict:
    """A PVC whose content is the snapshot (spec.dataSource), for the reader pod to mount."""
    status = snapshot.get("status") or {}
    source_spec = (source_claim or {}).get("spec") or {}
    size = status.get("restoreSize") or ((source_spec.get("resources") or {}).get("requests") or {}).get("storage") or "1Gi"
    spec: dict = {
        "accessModes": source_spec.get("accessModes") or ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        "dataSource": {"apiGroup": SNAPSHOT_API.split("/")[0], "kind": "VolumeSnapshot",
                       "name": snapshot["metadata"]["name"]},
    }
    if source_spec.get("storageClassName"):
        spec["storageClassName"] = source_spec["storageClassName"]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "labels": dict(SNAPSHOT_LABELS)}, "spec": spec}
