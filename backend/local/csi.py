"""The embedded storage driver as the CSI sidecars drive one: what a stored
PersistentVolumeClaim or VolumeSnapshot sets off in the API.

- A claim is provisioned and Bound (external-provisioner): at once when it has no dataSource;
  else Pending while its source's files are copied (contents from provisioner.py, the copy by
  the controller, storage.py), Bound after, or Pending with a ProvisioningFailed event while its
  source cannot be used.
- A VolumeSnapshot is taken at once and bound to its VolumeSnapshotContent (snapshot
  controller and csi-snapshotter); then the claims waiting for it are provisioned.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.errors import ClusterError
from backend.local import objects, provisioner
from backend.local.registry import admission
from backend.local.registry.kinds import Kind
from backend.quantity import quantity

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

STORAGE_CLASS = "standard"
SNAPSHOT_CLASS = "kfcockpit-snapclass"
DRIVER = "kfcockpit.io/local-dir"


def provision(api: ClusterApi, kind: Kind, obj: dict[str, Any]) -> None:
    """The claim's volume, then Bound. One with a dataSource stays Pending with the
    provisioner's ProvisioningFailed event while its source cannot be used (provisioner.py),
    else is Pending while the source's files are copied in the background (a pod mounting it
    waits, Controller.wait_for_volumes), as a create on a real cluster returns before the
    provisioner has made the volume."""
    meta = obj["metadata"]
    storage_class = (obj.get("spec") or {}).get("storageClassName") or STORAGE_CLASS
    claim = admission.check_model(kind, obj)
    if provisioner.data_source(obj) is None:
        api.ctl.claim_applied(claim)
        _bound(api, kind, obj, storage_class)
        return
    key = (meta.get("namespace"), meta["name"])
    if key in api.provisioning:
        return  # its copy is under way
    api.mirror.event(obj, "Normal", "Provisioning", "External provisioner is provisioning volume for claim "
                     f'"{meta.get("namespace")}/{meta["name"]}"', DRIVER)
    try:
        contents, source = provisioner.contents(api, obj)
        if api.ctl.layout.volume_dir(meta["name"]).exists():
            raise ClusterError(f"volume {meta['name']!r} exists on this node already (PersistentVolumeClaims "
                               "share one set of names across namespaces on the embedded cluster)")
    except provisioner.NotProvisionable as exc:
        _not_provisioned(api, kind, obj, provisioner.failure(obj, storage_class, exc))
        return
    except ClusterError as exc:
        _not_provisioned(api, kind, obj, f'failed to provision volume with StorageClass "{storage_class}": {exc}')
        return
    api.set_status(kind, obj, {"phase": "Pending"}, spec_extra={"storageClassName": storage_class})
    api.provisioning[key] = asyncio.get_running_loop().create_task(
        _fill(api, kind, obj, claim, contents, source, storage_class), name=f"provision {key}")


async def _fill(api: ClusterApi, kind: Kind, obj: dict[str, Any], claim: Any, contents: Path, source: dict[str, Any],
                storage_class: str) -> None:
    """The copy of a claim's source, then Bound; or the ProvisioningFailed event when the copy
    fails or the source was deleted meanwhile (the copy may be partial: it is dropped)."""
    meta = obj["metadata"]
    directory = api.ctl.layout.volume_dir(meta["name"])
    filled, problem = False, ""
    try:
        await api.ctl.fill_volume(meta["name"], contents)
        filled = True
        provisioner.check_kept(api, source)
    except provisioner.NotProvisionable as exc:
        problem = provisioner.failure(obj, storage_class, exc)
    except ClusterError as exc:  # the copy failed (no space left, say)
        problem = f'failed to provision volume with StorageClass "{storage_class}": {exc}'
    finally:
        api.provisioning.pop((meta.get("namespace"), meta["name"]), None)
    live = api.store.find(kind, meta.get("namespace"), meta["name"])
    if problem or live is None or live["metadata"].get("uid") != meta.get("uid"):
        if filled:
            shutil.rmtree(directory, ignore_errors=True)
        if problem and live is not None:
            _not_provisioned(api, kind, live, problem)
        return
    api.ctl.claim_applied(claim)
    _bound(api, kind, live, storage_class)
    api.mirror.event(live, "Normal", "ProvisioningSucceeded",
                     f"Successfully provisioned volume pvc-{meta['uid']}", DRIVER)


def _bound(api: ClusterApi, kind: Kind, obj: dict[str, Any], storage_class: str) -> None:
    spec = obj.get("spec") or {}
    api.set_status(kind, obj, {"phase": "Bound", "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
                               "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {})
                                            .get("storage", "1Gi")}},
                   spec_extra={"volumeName": f"pvc-{obj['metadata']['uid']}", "storageClassName": storage_class})


def _not_provisioned(api: ClusterApi, kind: Kind, obj: dict[str, Any], problem: str) -> None:
    api.mirror.event(obj, "Warning", "ProvisioningFailed", problem, DRIVER)
    api.set_status(kind, obj, {"phase": "Pending"},
                   spec_extra={"storageClassName": (obj.get("spec") or {}).get("storageClassName")
                               or STORAGE_CLASS})
    api.ctl.volume_changed()  # pods waiting for it say why now


def take_snapshot(api: ClusterApi, kind: Kind, obj: dict[str, Any]) -> None:
    """Taken at once (volumes.create_snapshot), so ready when the create returns; bound to its
    VolumeSnapshotContent as the snapshot controller binds them; then the claims that were
    waiting for it are provisioned. Its restoreSize is the source volume's capacity, as a CSI
    driver reports it (csi-hostpath: the volume's size): a claim of the source's size restores
    it, however full the volume (capacity is not enforced here)."""
    meta = obj["metadata"]
    snap = api.ctl.take_snapshot(admission.check_model(kind, obj))
    class_name = (obj.get("spec") or {}).get("volumeSnapshotClassName") or SNAPSHOT_CLASS
    content = f"snapcontent-{meta['uid']}"
    claim = api.store.find(api.kinds["PersistentVolumeClaim"], meta.get("namespace"),
                           obj["spec"]["source"]["persistentVolumeClaimName"]) or {}
    capacity = (((claim.get("status") or {}).get("capacity") or {}).get("storage")
                or (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
                or "1Gi")
    api.store.create(api.kinds["VolumeSnapshotContent"], {
        "metadata": {"name": content},
        "spec": {"deletionPolicy": "Delete", "driver": DRIVER, "volumeSnapshotClassName": class_name,
                 "source": {"volumeHandle": (claim.get("spec") or {}).get("volumeName") or ""},
                 "sourceVolumeMode": "Filesystem",
                 "volumeSnapshotRef": {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta["name"],
                                       "namespace": meta.get("namespace"), "uid": meta.get("uid")}},
        "status": {"readyToUse": True, "restoreSize": int(quantity(capacity)),
                   "creationTime": int(snap["created"] * 1e9), "snapshotHandle": meta["name"]}})
    api.set_status(kind, obj, {"readyToUse": True, "creationTime": objects.rfc3339(snap["created"]),
                               "restoreSize": capacity, "boundVolumeSnapshotContentName": content},
                   spec_extra={"volumeSnapshotClassName": class_name})
    claims = api.kinds["PersistentVolumeClaim"]
    for waiting in api.store.list(claims, meta.get("namespace")):
        if ((waiting.get("status") or {}).get("phase") == "Pending"
                and provisioner.names(waiting, kind.kind, meta["name"])):
            provision(api, claims, waiting)

