"""CSI VolumeSnapshots (snapshot.storage.k8s.io/v1) of checkpoint volumes, and the temporary
PVC that restores one so the reader pod can look inside it.

A snapshot needs a VolumeSnapshotClass whose driver is the provisioner of the volume's
StorageClass (kind's default `standard` class has none; csi-hostpath has): the class is picked
by that rule, unless one is marked default.
"""

from __future__ import annotations

import json

from backend.kube.pods import parse_time
from backend.kube.reader import metrics_from
from backend.models import SNAPSHOT_API, ObjectMeta, Snapshot, SnapshotSource, VolumeSnapshot, VolumeSnapshotSpec

DEFAULT_CLASS_ANNOTATION = "snapshot.storage.kubernetes.io/is-default-class"
DEFAULT_STORAGE_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
SNAPSHOT_LABELS = {"app.kubernetes.io/part-of": "kfcockpit"}
# What the volume held when the snapshot was taken (files, bytes, runs' metrics), as JSON.
CONTENTS_ANNOTATION = "kfcockpit/contents"


def quantity_bytes(value: str | int | None) -> int:
    if value in (None, ""):
        return 0
    from kubernetes.utils.quantity import parse_quantity

    try:
        return int(parse_quantity(value))
    except ValueError:
        return 0


def snapshot_manifest(volume: str, name: str, class_name: str | None, contents: dict | None = None) -> dict:
    """The VolumeSnapshot; `contents` is the reader's scan of the volume (checkpoint details and
    loss histories left out: the annotation says what is there, a restore shows it all)."""
    annotations = {}
    if contents is not None:
        runs = [{k: v for k, v in m.items() if k != "loss_history"} for m in contents.get("metrics") or []]
        annotations[CONTENTS_ANNOTATION] = json.dumps(
            {"files": contents.get("files", 0), "size_bytes": contents.get("size_bytes", 0), "metrics": runs},
            separators=(",", ":"))
    return VolumeSnapshot(
        metadata=ObjectMeta(name=name, labels=dict(SNAPSHOT_LABELS), annotations=annotations),
        spec=VolumeSnapshotSpec(source=SnapshotSource(persistent_volume_claim_name=volume),
                                volume_snapshot_class_name=class_name),
    ).to_manifest()


def _contents(meta: dict) -> dict:
    try:
        found = json.loads((meta.get("annotations") or {}).get(CONTENTS_ANNOTATION) or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def snapshot_from(raw: dict) -> Snapshot:
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    source = ((raw.get("spec") or {}).get("source") or {})
    contents = _contents(meta)
    return Snapshot(
        name=meta.get("name", ""),
        volume=source.get("persistentVolumeClaimName") or source.get("volumeSnapshotContentName") or "",
        created=parse_time(status.get("creationTime")) or parse_time(meta.get("creationTimestamp")) or 0.0,
        ready=bool(status.get("readyToUse")),
        files=int(contents.get("files") or 0),
        size_bytes=int(contents.get("size_bytes") or 0) or quantity_bytes(status.get("restoreSize")),
        metrics=metrics_from(contents),
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
    requested = ((source_spec.get("resources") or {}).get("requests") or {}).get("storage")
    size = status.get("restoreSize") or requested or "1Gi"
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
