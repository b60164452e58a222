"""VolumeSnapshots taken and bound, as the CSI snapshot controller and csi-snapshotter do it
(kubernetes-csi/external-snapshotter pkg/common-controller, pkg/sidecar-controller), for claims
of this cluster's driver.

A new snapshot names its class (spec.volumeSnapshotClassName, else the default class's name is
set), and its claim must be bound; then the claim's volume is linked into
`<snapshots>/<content>/data` (hostpath.take_snapshot: O(files)), a VolumeSnapshotContent
`snapcontent-<snapshot uid>` is made for it, ready, and the snapshot is bound to it and ready,
with restoreSize the claim's capacity (as csi-hostpath reports a volume's size). Both carry the
bound-protection finalizers. What stands in the way is the snapshot's status.error and a
SnapshotContentCreationFailed event, in upstream's words (a class that does not exist, a claim
not found or not yet bound), and it is tried again when the class or the claim changes.

A snapshot deleted takes its content and its files with it (deletionPolicy Delete).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Hashable

from backend.errors import InvalidResource
from backend.local.controllers.base import Controller, namespaced_key
from backend.local.controllers.hostpath import take_snapshot
from backend.local.controllers.volumes import DRIVER
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.strategies.storage import SNAPSHOT_GROUP
from backend.local.registry.strategy import Obj
from backend.quantity import quantity

SNAPSHOT_FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
CONTENT_FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
DEFAULT_ANNOTATION = "snapshot.storage.kubernetes.io/is-default-class"


def _quoted(text: str) -> str:
    """Go's %q of an error message."""
    return json.dumps(text)


class Snapshotter(Controller):
    name = "snapshot-controller"

    def __init__(self, client: Client, record: Record, snapshots: Path, volumes: Path):
        super().__init__(client)
        self.record, self.snapshots, self.volumes = record, snapshots, volumes
        self.taken = self.inform("VolumeSnapshot", lambda _t, o, _o: self.queue.add(namespaced_key(o)))
        self.inform("VolumeSnapshotClass", lambda *_: self._all())
        self.inform("PersistentVolumeClaim", self._claim_changed)

    def _all(self) -> None:
        for snapshot in self.taken.items():
            self.queue.add(namespaced_key(snapshot))

    def _claim_changed(self, event_type: str, claim: Obj, old: Obj | None) -> None:
        namespace, name = namespaced_key(claim)
        for snapshot in self.taken.items():
            source = ((snapshot.get("spec") or {}).get("source") or {}).get("persistentVolumeClaimName")
            if snapshot["metadata"]["namespace"] == namespace and source == name:
                self.queue.add(namespaced_key(snapshot))

    async def reconcile(self, key: Hashable) -> float | None:
        namespace, name = key
        snapshot = self.client.get("VolumeSnapshot", namespace, name)
        if snapshot is None:
            return None
        if snapshot["metadata"].get("deletionTimestamp"):
            self._delete(snapshot)
            return None
        if (snapshot.get("status") or {}).get("readyToUse"):
            return None
        try:
            class_name, claim = self._inputs(snapshot)
        except InvalidResource as exc:
            self._error(snapshot, f"Failed to create snapshot content with error failed to get input parameters to "
                                  f"create snapshot {name}: {_quoted(str(exc))}")
            return None
        self._take(snapshot, class_name, claim)
        return None

    def driver(self, claim: Obj | None) -> str:
        """The CSI driver of a claim's volume (its PersistentVolume's, else its class's)."""
        volume = self.client.peek("PersistentVolume", None, ((claim or {}).get("spec") or {}).get("volumeName") or "")
        if volume is not None:
            return ((volume.get("spec") or {}).get("csi") or {}).get("driver") or DRIVER
        found = self.client.peek("StorageClass", None, ((claim or {}).get("spec") or {}).get("storageClassName") or "")
        return (found or {}).get("provisioner") or DRIVER

    def _inputs(self, snapshot: Obj) -> tuple[str, Obj]:
        """getCreateSnapshotInput: the class and the bound claim, or why not (a snapshot naming
        no class gets the default class of its volume's driver, SetDefaultSnapshotClass)."""
        spec = snapshot.get("spec") or {}
        class_name = spec.get("volumeSnapshotClassName")
        claim_name = (spec.get("source") or {}).get("persistentVolumeClaimName") or ""
        if class_name:
            found = self.client.peek("VolumeSnapshotClass", None, class_name)
            if found is None:
                raise InvalidResource(f'volumesnapshotclass.{SNAPSHOT_GROUP} "{class_name}" not found')
        else:
            driver = self.driver(self.client.peek("PersistentVolumeClaim", snapshot["metadata"]["namespace"],
                                                  claim_name))
            defaults = [c for c in self.client.list("VolumeSnapshotClass")
                        if (c["metadata"].get("annotations") or {}).get(DEFAULT_ANNOTATION) == "true"
                        and c.get("driver") == driver]
            if not defaults:
                raise InvalidResource(f"failed to take snapshot {snapshot['metadata']['name']} without a snapshot "
                                      "class")
            class_name = defaults[0]["metadata"]["name"]
        claim = self.client.get("PersistentVolumeClaim", snapshot["metadata"]["namespace"], claim_name)
        if claim is None:
            raise InvalidResource(f"failed to retrieve PVC {claim_name} from the lister: "
                                  f"{_quoted(f'persistentvolumeclaim {json.dumps(claim_name)} not found')}")
        if (claim.get("status") or {}).get("phase") != "Bound" or not claim["spec"].get("volumeName"):
            raise InvalidResource(f"the PVC {claim_name} is not yet bound to a PV, will not attempt to take a snapshot")
        return class_name, claim

    def _take(self, snapshot: Obj, class_name: str, claim: Obj) -> None:
        meta = snapshot["metadata"]
        content_name = f"snapcontent-{meta['uid']}"
        directory = self.snapshots / content_name
        self.record(snapshot, "Normal", "CreatingSnapshot", f"Waiting for a snapshot {meta['namespace']}/"
                                                            f"{meta['name']} to be created by the CSI driver.")
        if not directory.exists():
            try:
                take_snapshot(self.volumes / meta["namespace"] / claim["spec"]["volumeName"], directory)
            except InvalidResource as exc:
                self._error(snapshot, f"Failed to create snapshot content with error {exc}")
                return
        capacity = (((claim.get("status") or {}).get("capacity") or {}).get("storage")
                    or (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
                    or "1Gi")
        now = self.client.now()
        if self.client.peek("VolumeSnapshotContent", None, content_name) is None:
            content = self.client.create("VolumeSnapshotContent", {
                "metadata": {"name": content_name, "finalizers": [CONTENT_FINALIZER]},
                "spec": {"deletionPolicy": "Delete", "driver": self.driver(claim),
                         "volumeSnapshotClassName": class_name,
                         "source": {"volumeHandle": claim["spec"]["volumeName"]}, "sourceVolumeMode": "Filesystem",
                         "volumeSnapshotRef": {"apiVersion": f"{SNAPSHOT_GROUP}/v1", "kind": "VolumeSnapshot",
                                               "name": meta["name"], "namespace": meta["namespace"],
                                               "uid": meta["uid"]}}})
            content["status"] = {"readyToUse": True, "restoreSize": int(quantity(capacity)),
                                 "creationTime": int(directory.stat().st_mtime * 1e9), "snapshotHandle": content_name}
            self.client.update_status("VolumeSnapshotContent", content)
        if SNAPSHOT_FINALIZER not in (meta.get("finalizers") or []) or \
                snapshot["spec"].get("volumeSnapshotClassName") != class_name:
            snapshot["metadata"]["finalizers"] = [*(meta.get("finalizers") or []), SNAPSHOT_FINALIZER]
            snapshot["spec"]["volumeSnapshotClassName"] = class_name
            snapshot = self.client.update("VolumeSnapshot", snapshot)
        snapshot["status"] = {"readyToUse": True, "creationTime": now, "restoreSize": capacity,
                              "boundVolumeSnapshotContentName": content_name}
        self.client.update_status("VolumeSnapshot", snapshot)
        self.record(snapshot, "Normal", "SnapshotCreated", f"Snapshot {meta['namespace']}/{meta['name']} was "
                                                           "successfully created by the CSI driver.")
        self.record(snapshot, "Normal", "SnapshotReady", f"Snapshot {meta['namespace']}/{meta['name']} is ready "
                                                         "to use.")

    def _error(self, snapshot: Obj, message: str) -> None:
        status = snapshot.get("status") or {}
        if (status.get("error") or {}).get("message") == message:
            return
        snapshot["status"] = {**status, "readyToUse": False, "error": {"message": message, "time": self.client.now()}}
        self.client.update_status("VolumeSnapshot", snapshot)
        self.record(snapshot, "Warning", "SnapshotContentCreationFailed", message)

    def _delete(self, snapshot: Obj) -> None:
        """The snapshot goes: its content and files first (deletionPolicy Delete)."""
        content_name = (snapshot.get("status") or {}).get("boundVolumeSnapshotContentName")
        if content_name:
            content = self.client.get("VolumeSnapshotContent", None, content_name)
            if content is not None:
                content["metadata"]["finalizers"] = [f for f in content["metadata"].get("finalizers") or []
                                                     if f != CONTENT_FINALIZER]
                self.client.update("VolumeSnapshotContent", content)
                self.client.delete("VolumeSnapshotContent", None, content_name)
            shutil.rmtree(self.snapshots / content_name, ignore_errors=True)
        meta = snapshot["metadata"]
        if SNAPSHOT_FINALIZER in (meta.get("finalizers") or []):
            snapshot["metadata"]["finalizers"] = [f for f in meta["finalizers"] if f != SNAPSHOT_FINALIZER]
            self.client.update("VolumeSnapshot", snapshot)
