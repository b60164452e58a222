"""What every embedded cluster has before anyone applies anything: the system namespaces, its
one Node, the controller's own pod (as the Trainer's controller-manager, which a preflight looks
for), the default StorageClass, VolumeSnapshotClass and ServiceAccount, and, once on the first
start, what installing the Trainer gives (`manifests/embedded/`, `manifests/runtime.yaml`).
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

from backend.local import objects
from backend.local.csi import DRIVER, SNAPSHOT_CLASS, STORAGE_CLASS
from backend.project import MANIFESTS

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
INSTALLED = (MANIFESTS / "embedded" / "torch-distributed.yaml", MANIFESTS / "runtime.yaml")


def ensure(api: ClusterApi, first_start: bool) -> str:
    """Create what is missing; returns the name of this start's controller pod."""
    for name in (*SYSTEM_NAMESPACES, objects.TRAINER_NAMESPACE):
        if api.store.find(api.kinds["Namespace"], None, name) is None:
            api.store.create(api.kinds["Namespace"], {"metadata": {"name": name},
                                                      "spec": {"finalizers": ["kubernetes"]},
                                                      "status": {"phase": "Active"}})
    api.store.create(api.kinds["Node"], objects.node_object(api.capacity["cpu"], api.capacity["memory"]))
    # What installing the Trainer gives, its controller-manager pod: this process is that
    # controller. Pods are not kept across restarts, so it is made at each start.
    controller_pod = f"kubeflow-trainer-controller-manager-{secrets.token_hex(3)[:5]}"
    api.store.create(api.kinds["Pod"], objects.controller_pod(controller_pod, os.getpid(), time.time()))
    if not api.store.list(api.kinds["StorageClass"]):
        api.store.create(api.kinds["StorageClass"], {
            "metadata": {"name": STORAGE_CLASS,
                         "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
    if not api.store.list(api.kinds["VolumeSnapshotClass"]):
        api.store.create(api.kinds["VolumeSnapshotClass"], {
            "metadata": {"name": SNAPSHOT_CLASS,
                         "annotations": {"snapshot.storage.kubernetes.io/is-default-class": "true"}},
            "driver": DRIVER, "deletionPolicy": "Delete"})
    for ns in SYSTEM_NAMESPACES[:1]:
        if api.store.find(api.kinds["ServiceAccount"], ns, "default") is None:
            api.store.create(api.kinds["ServiceAccount"], {"metadata": {"name": "default", "namespace": ns}})
    if first_start:
        _install(api, INSTALLED)
    return controller_pod


def _install(api: ClusterApi, files: tuple[Path, ...]) -> None:
    """What `manifests/install/install.sh` puts on a kind cluster: the Trainer's stock runtime
    and public ConfigMap, and the lesson's runtime. Once, on the first start: a user who
    deletes them later keeps them deleted."""
    import yaml

    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            create_missing(api, doc)


def create_missing(api: ClusterApi, manifest: dict) -> None:
    """Store `manifest` (namespaced ones in "default" when they name none) unless an object of
    its kind and name is there already."""
    kind = api.registry.by_kind(manifest["apiVersion"], manifest["kind"])
    meta = manifest.setdefault("metadata", {})
    if kind.namespaced:
        meta.setdefault("namespace", "default")
    if api.store.find(kind, meta.get("namespace"), meta["name"]) is None:
        api.store.create(kind, manifest)
