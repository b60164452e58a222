"""The claims' volumes: provisioned, protected while used, reclaimed, as the CSI external-provisioner
(pkg/controller/controller.go), the PVC protection controller and the Delete reclaim policy do it
for a claim of this cluster's StorageClasses, of two drivers:

- kfcockpit.io/local-dir: a volume lives on one node, as csi-hostpath's and kind's local-path
  ones do: its PersistentVolume's node affinity (kubernetes.io/hostname) names the node, so every
  pod that mounts it runs there. With volumeBindingMode WaitForFirstConsumer (the default class
  `standard`), the node is the one the scheduler chose for the claim's first pod
  (`volume.kubernetes.io/selected-node`); until then the claim waits (a WaitForFirstConsumer
  event). ReadWriteOnce: one node's pods share it; ReadWriteMany is refused.
- kfcockpit.io/shared-dir: a volume every node mounts (what an NFS export gives), no node
  affinity, ReadWriteMany (the class `nfs-csi`, named as csi-driver-nfs's example class).

- Provisioning: a Pending claim gets a directory of its own, `<volumes>/<namespace>/pvc-<uid>`
  (its volumeName, as a provisioner names the volume), a PersistentVolume bound to it, and is
  Bound. One whose
  dataSource/dataSourceRef names a VolumeSnapshot starts as a copy of the snapshot's files, one
  naming a claim as a clone of that volume (getSnapshotSource / getPVCSource: a source missing,
  not bound, not ready or larger than the request leaves it Pending with a ProvisioningFailed
  event in upstream's words; the source's arrival or change tries again). The copy runs in the
  background (hostpath.fill); a source deleted meanwhile fails it.
- Protection: a claim carries `kubernetes.io/pvc-protection`; once deleted it stays Terminating
  until no pod that has not finished uses it, then goes.
- Reclaim: a claim that is gone takes its volume's files and PersistentVolume with it
  (reclaimPolicy Delete).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Hashable

from backend.errors import InvalidResource
from backend.local.controllers.base import Controller, namespaced_key
from backend.local.controllers.hostpath import DATA, RunChild, fill
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.informer import DELETED
from backend.local.registry.strategies.storage import PVC_PROTECTION, SNAPSHOT_GROUP
from backend.local.registry.strategy import Obj
from backend.quantity import quantity

DRIVER = "kfcockpit.io/local-dir"  # a node's
SHARED_DRIVER = "kfcockpit.io/shared-dir"  # every node's
DRIVERS = (DRIVER, SHARED_DRIVER)
SELECTED_NODE = "volume.kubernetes.io/selected-node"
HOSTNAME = "kubernetes.io/hostname"


class NotProvisionable(Exception):
    """Why the claim's volume cannot be made yet, in the provisioner's words."""


def data_source(claim: Obj) -> Obj | None:
    spec = claim.get("spec") or {}
    return spec.get("dataSourceRef") or spec.get("dataSource") or None


def volume_name(claim: Obj) -> str:
    return f"pvc-{claim['metadata']['uid']}"


def _bytes(value) -> int:
    try:
        return int(quantity(value))
    except ValueError:
        return 0


def _requested(claim: Obj) -> int:
    return _bytes((((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage"))


def uses(pod: Obj, claim: str) -> bool:
    return any((v.get("persistentVolumeClaim") or {}).get("claimName") == claim
               for v in (pod.get("spec") or {}).get("volumes") or [])


class Provisioner(Controller):
    name = DRIVER

    def __init__(self, client: Client, record: Record, volumes: Path, snapshots: Path, run_child: RunChild):
        super().__init__(client)
        self.record, self.volumes, self.snapshots, self.run_child = record, volumes, snapshots, run_child
        self.claims = self.inform("PersistentVolumeClaim", self._claim_changed)
        self.inform("VolumeSnapshot", self._source_changed)
        self.inform("Pod", self._pod_changed)
        self.inform("StorageClass", lambda *_: [self.queue.add(namespaced_key(c)) for c in self.claims.items()])
        self.copying: dict[tuple[str, str], asyncio.Task] = {}

    def _claim_changed(self, event_type: str, claim: Obj, old: Obj | None) -> None:
        if event_type == DELETED:
            self._reclaim(claim)
            self._source_changed(event_type, claim, old)
            return
        self.queue.add(namespaced_key(claim))
        if (claim.get("status") or {}).get("phase") == "Bound":
            self._source_changed(event_type, claim, old)  # clones of it may go on now

    def _source_changed(self, event_type: str, source: Obj, old: Obj | None) -> None:
        """A snapshot or claim changed: the claims whose data source it is look again."""
        namespace, name = namespaced_key(source)
        for claim in self.claims.items():
            ref = data_source(claim) or {}
            if claim["metadata"]["namespace"] == namespace and ref.get("name") == name and \
                    ref.get("kind") == source["kind"]:
                self.queue.add(namespaced_key(claim))

    def _pod_changed(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                self.queue.add((pod["metadata"]["namespace"], claim))

    async def reconcile(self, key: Hashable) -> float | None:
        namespace, name = key
        claim = self.client.get("PersistentVolumeClaim", namespace, name)
        if claim is None:
            return None
        if claim["metadata"].get("deletionTimestamp"):
            self._release_if_unused(claim)
            return None
        if (claim.get("status") or {}).get("phase") == "Bound" or key in self.copying:
            return None
        class_name = (claim.get("spec") or {}).get("storageClassName") or ""
        storage_class = self.client.peek("StorageClass", None, class_name)
        if storage_class is None:
            self._failed(claim, f'storageclass.storage.k8s.io "{class_name}" not found')
            return None
        if storage_class.get("provisioner") not in DRIVERS:
            return None  # another provisioner's (none runs here)
        modes = set((claim.get("spec") or {}).get("accessModes") or ["ReadWriteOnce"])
        if storage_class["provisioner"] == DRIVER and modes & {"ReadWriteMany", "ReadOnlyMany"}:
            self._failed(claim, f'failed to provision volume with StorageClass "{class_name}": {DRIVER} volumes are '
                                "a directory on one node, so ReadWriteOnce only; for ReadWriteMany use a class every "
                                "node mounts (nfs-csi)")
            return None
        if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and \
                not (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE):
            self.record(claim, "Normal", "WaitForFirstConsumer", "waiting for first consumer to be created before "
                                                                 "binding")
            return None
        if data_source(claim) is None:
            (self.volumes / namespace / volume_name(claim)).mkdir(parents=True, exist_ok=True)
            self._bind(claim, storage_class)
            return None
        self.record(claim, "Normal", "Provisioning", "External provisioner is provisioning volume for claim "
                                                     f'"{namespace}/{name}"')
        try:
            contents, source = self._contents(claim)
        except NotProvisionable as exc:
            self._failed(claim, self._failure(claim, exc))
            return None
        self.copying[key] = asyncio.create_task(self._copy(claim, storage_class, contents, source),
                                                name=f"provision {namespace}/{name}")
        return None

    # ------------------------------------------------------------------ provisioning

    def _contents(self, claim: Obj) -> tuple[Path, Obj]:
        """(the directory the volume starts as a copy of, the source object); NotProvisionable
        when the source is not usable (yet)."""
        source = data_source(claim) or {}
        group, kind = source.get("apiGroup") or "", source.get("kind")
        namespace = claim["metadata"]["namespace"]
        if group == SNAPSHOT_GROUP and kind == "VolumeSnapshot":
            return self._snapshot_contents(claim, namespace, source["name"])
        if not group and kind == "PersistentVolumeClaim":
            return self._clone_contents(claim, namespace, source["name"])
        # Upstream hands any other kind to a volume populator; this cluster runs none.
        raise NotProvisionable(f"no volume populator for {kind}{'.' + group if group else ''} runs on the "
                               "embedded cluster (VolumeSnapshot and PersistentVolumeClaim sources are supported)")

    def _snapshot_contents(self, claim: Obj, namespace: str, name: str) -> tuple[Path, Obj]:
        """getSnapshotSource's checks, in its order and words."""
        snapshot = self.client.get("VolumeSnapshot", namespace, name)
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
        data = self.snapshots / status["boundVolumeSnapshotContentName"] / DATA
        if not data.is_dir():
            raise NotProvisionable(f"snapshot handle {name} is not available")
        if status.get("restoreSize") is not None:
            requested, size = _requested(claim), _bytes(status["restoreSize"])
            if requested < size:
                raise NotProvisionable(f"requested volume size {requested} is less than the size {size} for the "
                                       f"source snapshot {name}")
        return data, snapshot

    def _clone_contents(self, claim: Obj, namespace: str, name: str) -> tuple[Path, Obj]:
        """getPVCSource's checks, in its order and words."""
        source = self.client.get("PersistentVolumeClaim", namespace, name)
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
        directory = self.volumes / namespace / (source["spec"].get("volumeName") or "")
        if not directory.is_dir():
            raise NotProvisionable("claim in dataSource not bound or invalid")
        return directory, source

    async def _copy(self, claim: Obj, storage_class: Obj, contents: Path, source: Obj) -> None:
        meta = claim["metadata"]
        key = (meta["namespace"], meta["name"])
        directory = self.volumes / meta["namespace"] / volume_name(claim)
        problem = ""
        try:
            directory.parent.mkdir(parents=True, exist_ok=True)
            await fill(directory, contents, self.run_child)
            if not self._still_there(source):
                raise NotProvisionable(f"snapshot {source['metadata']['name']} is being deleted"
                                       if source["kind"] == "VolumeSnapshot" else
                                       f"the PVC DataSource {source['metadata']['name']} is currently being deleted")
        except NotProvisionable as exc:
            problem = self._failure(claim, exc)
        except InvalidResource as exc:  # the copy failed (no space left, say)
            problem = f'failed to provision volume with StorageClass "{storage_class["metadata"]["name"]}": {exc}'
        finally:
            self.copying.pop(key, None)
        live = self.client.get("PersistentVolumeClaim", *key)
        if problem or live is None or live["metadata"]["uid"] != meta["uid"]:
            shutil.rmtree(directory, ignore_errors=True)  # a partial copy is no volume
            if problem and live is not None:
                self._failed(live, problem)
            return
        self._bind(live, storage_class)

    def _still_there(self, source: Obj) -> bool:
        meta = source["metadata"]
        live = self.client.peek(source["kind"], meta["namespace"], meta["name"])
        return live is not None and live["metadata"]["uid"] == meta["uid"]

    def _bind(self, claim: Obj, storage_class: Obj) -> None:
        spec = claim.get("spec") or {}
        self._volume(claim, storage_class)
        claim["spec"]["volumeName"] = volume_name(claim)
        claim = self.client.update("PersistentVolumeClaim", claim)
        claim["status"] = {"phase": "Bound", "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                           "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {})
                                        .get("storage", "1Gi")}}
        self.client.update_status("PersistentVolumeClaim", claim)
        self.record(claim, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume {volume_name(claim)}")

    def _volume(self, claim: Obj, storage_class: Obj) -> None:
        """The claim's PersistentVolume, bound to it; on one node for the local driver."""
        meta, spec = claim["metadata"], claim.get("spec") or {}
        if self.client.peek("PersistentVolume", None, volume_name(claim)) is not None:
            return
        driver = storage_class["provisioner"]
        volume_spec: Obj = {
            "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy", "Delete"),
            "storageClassName": storage_class["metadata"]["name"], "volumeMode": "Filesystem",
            "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta["namespace"],
                         "name": meta["name"], "uid": meta["uid"]},
            "csi": {"driver": driver, "volumeHandle": volume_name(claim), "fsType": "ext4"}}
        node = (meta.get("annotations") or {}).get(SELECTED_NODE)
        if driver == DRIVER and node:
            volume_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}
        volume = self.client.create("PersistentVolume", {
            "metadata": {"name": volume_name(claim), "annotations": {"pv.kubernetes.io/provisioned-by": driver}},
            "spec": volume_spec})
        volume["status"] = {"phase": "Bound"}
        self.client.update_status("PersistentVolume", volume)

    def _failed(self, claim: Obj, message: str) -> None:
        self.record(claim, "Warning", "ProvisioningFailed", message)

    @staticmethod
    def _failure(claim: Obj, problem: NotProvisionable) -> str:
        """The ProvisioningFailed message (sig-storage-lib-external-provisioner around Provision's
        error, which wraps getVolumeContentSource's)."""
        source = data_source(claim) or {}
        class_name = (claim.get("spec") or {}).get("storageClassName") or ""
        return (f'failed to provision volume with StorageClass "{class_name}": error getting handle for DataSource '
                f"Type {source.get('kind')} by Name {source.get('name')}: {problem}")

    # ------------------------------------------------------------------ protection and reclaim

    def _release_if_unused(self, claim: Obj) -> None:
        meta = claim["metadata"]
        if PVC_PROTECTION not in (meta.get("finalizers") or []):
            return
        for pod in self.client.list("Pod", meta["namespace"]):
            if uses(pod, meta["name"]) and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                return  # in use: it stays (Terminating) until that pod has finished

        def release(live: Obj) -> None:
            live["metadata"]["finalizers"] = [f for f in live["metadata"].get("finalizers") or []
                                              if f != PVC_PROTECTION]
        self.client.mutate("PersistentVolumeClaim", meta["namespace"], meta["name"], release)

    def _reclaim(self, claim: Obj) -> None:
        name = (claim.get("spec") or {}).get("volumeName")
        if name:
            shutil.rmtree(self.volumes / claim["metadata"]["namespace"] / name, ignore_errors=True)
            volume = self.client.peek("PersistentVolume", None, name)
            if volume is not None and ((volume.get("spec") or {}).get("claimRef") or {}).get("uid") == \
                    claim["metadata"].get("uid"):
                self.client.delete("PersistentVolume", None, name)
