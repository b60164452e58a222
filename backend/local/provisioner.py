"""The embedded storage driver's provisioner: what a new PersistentVolumeClaim's volume starts with.

As kubernetes-csi/external-provisioner does for a CSI driver (pkg/controller/controller.go:
Provision → getVolumeContentSource → getSnapshotSource / getPVCSource): a claim whose
dataSource names a VolumeSnapshot starts with the snapshot's files, one naming a
PersistentVolumeClaim with a clone of that volume, any other claim empty. A source that is
missing, not bound, not ready or larger than the request is refused with upstream's message;
the claim stays Pending with a Warning ProvisioningFailed event (csi.py), and is provisioned
when the snapshot it waits for is taken (upstream retries with a back-off; here that snapshot's
creation sets it off). The copy itself is Controller.fill_volume; a source deleted while it was
being copied fails the provisioning (the copy may be partial) instead of leaving it unnoticed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.quantity import quantity
from backend.local.volumes import DATA

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

SNAPSHOT_GROUP = "snapshot.storage.k8s.io"


class NotProvisionable(Exception):
    """Why the claim's volume cannot be made yet, in the provisioner's words."""


def data_source(claim: dict[str, Any]) -> dict[str, Any] | None:
    """The claim's data source; admission keeps dataSource and dataSourceRef equal."""
    spec = claim.get("spec") or {}
    return spec.get("dataSourceRef") or spec.get("dataSource") or None


def names(claim: dict[str, Any], kind: str, name: str) -> bool:
    source = data_source(claim) or {}
    return source.get("kind") == kind and source.get("name") == name


def _bytes(value: Any) -> int:
    try:
        return int(quantity(value))
    except ValueError:
        return 0


def _requested(claim: dict[str, Any]) -> int:
    return _bytes((((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage"))


def failure(claim: dict[str, Any], storage_class: str, problem: NotProvisionable) -> str:
    """The ProvisioningFailed event's message (sig-storage-lib-external-provisioner around
    Provision's error, which wraps getVolumeContentSource's)."""
    source = data_source(claim) or {}
    return (f'failed to provision volume with StorageClass "{storage_class}": error getting handle for DataSource '
            f"Type {source.get('kind')} by Name {source.get('name')}: {problem}")


def contents(api: "ClusterApi", claim: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """(the directory the claim's volume starts as a copy of, the source object) for a claim
    with a data source; NotProvisionable when its source is not usable (yet)."""
    source = data_source(claim) or {}
    group, kind = source.get("apiGroup") or "", source.get("kind")
    namespace = claim["metadata"].get("namespace") or "default"
    if group == SNAPSHOT_GROUP and kind == "VolumeSnapshot":
        return _snapshot_contents(api, claim, namespace, source["name"])
    if not group and kind == "PersistentVolumeClaim":
        return _clone_contents(api, claim, namespace, source["name"])
    # Upstream hands any other kind to a volume populator; this cluster runs none.
    raise NotProvisionable(f"no volume populator for {kind}{'.' + group if group else ''} runs on the "
                           "embedded cluster (VolumeSnapshot and PersistentVolumeClaim sources are supported)")


def _snapshot_contents(api: "ClusterApi", claim: dict[str, Any], namespace: str,
                       name: str) -> tuple[Path, dict[str, Any]]:
    """getSnapshotSource's checks, in its order and words."""
    snapshot = api.store.find(api.kinds["VolumeSnapshot"], namespace, name)
    if snapshot is None:
        raise NotProvisionable(f"error getting snapshot {name} from api server: "
                               f'volumesnapshots.{SNAPSHOT_GROUP} "{name}" not found')
    if snapshot["metadata"].get("deletionTimestamp"):
        raise NotProvisionable(f"snapshot {name} is being deleted")
    status = snapshot.get("status") or {}
    if not status.get("boundVolumeSnapshotContentName"):
        raise NotProvisionable(f"snapshot {name} not bound")
    if not status.get("readyToUse"):
        raise NotProvisionable(f"snapshot {name} is not Ready")
    data = api.ctl.layout.snapshot_dir(name) / DATA
    if not data.is_dir():
        raise NotProvisionable(f"snapshot handle {name} is not available")
    if status.get("restoreSize") is not None:
        requested, size = _requested(claim), _bytes(status["restoreSize"])
        if requested < size:
            raise NotProvisionable(f"requested volume size {requested} is less than the size {size} for the "
                                   f"source snapshot {name}")
    return data, snapshot


def _clone_contents(api: "ClusterApi", claim: dict[str, Any], namespace: str,
                    name: str) -> tuple[Path, dict[str, Any]]:
    """getPVCSource's checks, in its order and words."""
    source = api.store.find(api.kinds["PersistentVolumeClaim"], namespace, name)
    if source is None:
        raise NotProvisionable(f'error getting PVC {name} (namespace "{namespace}") from api server: '
                               f'persistentvolumeclaim "{name}" not found')
    phase = (source.get("status") or {}).get("phase") or "Pending"
    if phase != "Bound":
        raise NotProvisionable(f"the PVC DataSource {name} must have a status of Bound.  Got {phase}")
    requested, size = _requested(claim), _requested(source)
    if requested < size:
        raise NotProvisionable("error, new PVC request must be greater than or equal in size to the specified "
                               f"PVC data source, requested {requested} but source is {size}")
    directory = api.ctl.layout.volume_dir(name)
    if not directory.is_dir():
        raise NotProvisionable("claim in dataSource not bound or invalid")
    return directory, source


def check_kept(api: "ClusterApi", source: dict[str, Any]) -> None:
    """NotProvisionable if `source` was deleted while its contents were being copied; in the
    words upstream uses for a source being deleted when provisioning starts."""
    meta = source["metadata"]
    live = api.store.find(api.kinds[source["kind"]], meta.get("namespace"), meta["name"])
    if live is not None and live["metadata"].get("uid") == meta.get("uid"):
        return
    if source["kind"] == "VolumeSnapshot":
        raise NotProvisionable(f"snapshot {meta['name']} is being deleted")
    raise NotProvisionable(f"the PVC DataSource {meta['name']} is currently being deleted")
