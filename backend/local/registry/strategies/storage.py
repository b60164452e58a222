"""The strategies of storage kinds: PersistentVolumeClaim, VolumeSnapshot, VolumeSnapshotContent.

- PersistentVolumeClaim (pkg/registry/core/persistentvolumeclaim, and the admission plugins
  DefaultStorageClass and StorageObjectInUseProtection): dataSource and dataSourceRef kept equal
  and checked (admission.py), the default StorageClass named when none is, Filesystem mode,
  status Pending, and the `kubernetes.io/pvc-protection` finalizer, so a claim a pod uses stays
  (Terminating) until no pod does. Its spec is fixed once created, but for a larger request and
  the volumeName its provisioner binds it to.
- VolumeSnapshot: its source is fixed once created.
- VolumeSnapshotContent: only dynamically provisioned ones (a volumeHandle source) are taken
  here; a pre-provisioned one (snapshotHandle) names a snapshot this driver never took. One bound
  to a VolumeSnapshot goes with it (delete that instead).
"""

from __future__ import annotations

import copy

from backend.local.registry import admission
from backend.local.registry.kinds import Kind
from backend.local.registry.status import forbidden, invalid, refused
from backend.local.registry.strategy import Obj, Reader, Strategy

PVC_PROTECTION = "kubernetes.io/pvc-protection"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
SNAPSHOT_GROUP = "snapshot.storage.k8s.io"


def default_class(reader: Reader) -> str | None:
    for storage_class in reader.list("StorageClass"):
        if (storage_class["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
            return storage_class["metadata"]["name"]
    return None


class ClaimStrategy(Strategy):
    def __init__(self, kind: Kind):
        self.kind = kind

    def prepare_for_create(self, obj: Obj, reader: Reader) -> None:
        spec = obj.setdefault("spec", {})
        admission.normalize_data_sources(spec)
        if spec.get("storageClassName") is None:
            found = default_class(reader)
            if found:
                spec["storageClassName"] = found
        spec.setdefault("volumeMode", "Filesystem")
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if PVC_PROTECTION not in finalizers:
            finalizers.append(PVC_PROTECTION)
        obj["status"] = {"phase": "Pending"}

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        admission.validate_claim_data_source(self.kind, obj)
        admission.check_model(self.kind, obj)
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        def fixed(spec: Obj, volume_name: str | None) -> Obj:
            spec = copy.deepcopy(spec)
            spec.get("resources", {}).get("requests", {}).pop("storage", None)
            spec.pop("volumeAttributesClassName", None)
            if volume_name is not None:
                spec["volumeName"] = volume_name
            return spec

        old_spec = old.get("spec") or {}
        binding = old_spec.get("volumeName") or (obj.get("spec") or {}).get("volumeName")
        if fixed(obj.get("spec") or {}, binding) != fixed(old_spec, binding):
            raise invalid(self.kind.kind, obj["metadata"]["name"],
                          [("spec", "Forbidden: spec is immutable after creation except resources.requests and "
                                    "volumeAttributesClassName for bound claims")])
        return []


class SnapshotStrategy(Strategy):
    def __init__(self, kind: Kind):
        self.kind = kind

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        admission.check_model(self.kind, obj)
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        if (obj.get("spec") or {}).get("source") != (old.get("spec") or {}).get("source"):
            raise invalid(self.kind.kind, obj["metadata"]["name"], [("spec.source", "Invalid value: field is "
                                                                                    "immutable")], self.kind.group)
        return []


class SnapshotContentStrategy(Strategy):
    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        if ((obj.get("spec") or {}).get("source") or {}).get("snapshotHandle"):
            raise refused("the embedded cluster makes a VolumeSnapshotContent for each VolumeSnapshot it takes; "
                          "pre-provisioned snapshot contents are not supported: create a VolumeSnapshot instead")
        return []

    def before_delete(self, obj: Obj, reader: Reader) -> None:
        ref = (obj.get("spec") or {}).get("volumeSnapshotRef") or {}
        snapshot = reader.find("VolumeSnapshot", ref.get("namespace"), ref.get("name", ""))
        if snapshot is not None and snapshot["metadata"].get("uid") == ref.get("uid") \
                and not snapshot["metadata"].get("deletionTimestamp"):
            raise forbidden(f'volumesnapshotcontents.{SNAPSHOT_GROUP} "{obj["metadata"]["name"]}" is forbidden: it '
                            f"goes with its VolumeSnapshot {ref.get('namespace')}/{ref.get('name')} (delete that "
                            "instead)")
