"""What every embedded cluster has before anyone applies anything: the system namespaces, the
StorageClasses (the default `standard`: a node's volumes, bound where their first pod runs, as
kind's; `nfs-csi`: ReadWriteMany volumes every node mounts; `csi-hostpath-sc` for the pipeline),
a VolumeSnapshotClass per driver, the default ServiceAccount, the controller's own pod (as the
Trainer's controller-manager, which a preflight looks for), and, once on the first start, what
installing the Trainer gives (`manifests/embedded/`, `manifests/runtime.yaml`). Written through the
in-process client like anything else, so they are what a client would have made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from backend.local.controllers.volumes import DRIVER, SHARED_DRIVER
from backend.local.node.kubelet import MIRROR_ANNOTATION
from backend.local.registry.client import Client
from backend.local.registry.strategies.core import TRAINER_NAMESPACE
from backend.local.registry.strategies.pods import CONTROLLER_POD_ANNOTATION
from backend.project import MANIFESTS

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", TRAINER_NAMESPACE)
INSTALLED = (MANIFESTS / "embedded" / "torch-distributed.yaml", MANIFESTS / "runtime.yaml")
STORAGE_CLASS = "standard"
# The class the lesson's pipeline names (backend/pipelines/definition.py; the kind setup's
# csi-driver-host-path class): the same volumes here, not the default.
PIPELINE_STORAGE_CLASS = "csi-hostpath-sc"
SNAPSHOT_CLASS = "kfcockpit-snapclass"
# ReadWriteMany volumes for a job whose workers run on several nodes: the class csi-driver-nfs's
# example names, so manifests/volume.yaml is one file for kind (install.sh nfs) and here.
SHARED_STORAGE_CLASS, SHARED_SNAPSHOT_CLASS = "nfs-csi", "csi-nfs-snapclass"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# The labels of the Trainer's controller-manager Deployment's pods (kubeflow/trainer
# manifests/base/manager/manager.yaml), by which `kubectl get pods -l` and preflights find it.
TRAINER_MANAGER_LABELS = {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager",
                          "app.kubernetes.io/part-of": "kubeflow"}


def ensure(client: Client, nodes: list[str], first_start: bool) -> str:
    """Create what is missing, drop the pods of nodes this start has no machine for; returns the name of
    this start's controller pod (shown on the first node)."""
    forget_nodes(client, nodes)
    for name in SYSTEM_NAMESPACES:
        if client.peek("Namespace", None, name) is None:
            client.create("Namespace", {"metadata": {"name": name}})
    if not client.list("StorageClass"):
        client.create("StorageClass", {
            "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"})
    if client.peek("StorageClass", None, SHARED_STORAGE_CLASS) is None:
        client.create("StorageClass", {
            "metadata": {"name": SHARED_STORAGE_CLASS}, "provisioner": SHARED_DRIVER, "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate", "allowVolumeExpansion": True})
    if client.peek("StorageClass", None, PIPELINE_STORAGE_CLASS) is None:
        client.create("StorageClass", {
            "metadata": {"name": PIPELINE_STORAGE_CLASS}, "provisioner": DRIVER, "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate", "allowVolumeExpansion": True})
    for name, driver in ((SNAPSHOT_CLASS, DRIVER), (SHARED_SNAPSHOT_CLASS, SHARED_DRIVER)):
        if not any(c.get("driver") == driver for c in client.list("VolumeSnapshotClass")):
            client.create("VolumeSnapshotClass", {
                "metadata": {"name": name, "annotations": {"snapshot.storage.kubernetes.io/is-default-class": "true"}},
                "driver": driver, "deletionPolicy": "Delete"})
    if client.peek("ServiceAccount", "default", "default") is None:
        client.create("ServiceAccount", {"metadata": {"name": "default", "namespace": "default"}})
    if first_start:
        for path in INSTALLED:
            install(client, path)
    return _controller_pod(client, nodes[0])


def forget_nodes(client: Client, kept: list[str]) -> None:
    """The pods of an earlier start bound to a node this one has no machine for (`cluster up
    --nodes` fewer, or a state root from before nodes had kind's names) go, as the pod GC does
    with pods bound to a node that does not exist (gcOrphaned: Failed, DisruptionTarget
    DeletionByPodGC, deleted at once), so their Jobs fail and start again on the nodes there are.
    (Nodes are not kept on disk: each start's kubelets register theirs.)"""
    now = client.now()

    def orphaned(live: dict) -> None:
        status = live.setdefault("status", {})
        if status.get("phase") not in ("Succeeded", "Failed"):
            status["phase"] = "Failed"
        status.setdefault("conditions", []).append({
            "type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
            "message": "PodGC: node no longer exists", "lastTransitionTime": now})

    for pod in client.list("Pod", match=lambda p: (p.get("spec") or {}).get("nodeName") not in (None, "", *kept)):
        meta = pod["metadata"]
        client.mutate("Pod", meta["namespace"], meta["name"], orphaned, status=True)
        client.delete("Pod", meta["namespace"], meta["name"], grace=0)


def install(client: Client, path: Path) -> None:
    """What `kubectl apply -f` of a file puts on a kind cluster, the annotation kubectl apply leaves
    included (so a later `kubectl apply` of it merges instead of warning); namespaced objects in
    "default" when they name none. An object already there is kept: a user who deleted one keeps
    it deleted, one who changed one keeps the change."""
    for doc in yaml.safe_load_all(path.read_text()):
        kind = client.kinds.by_kind(doc["apiVersion"], doc["kind"])
        meta = doc.setdefault("metadata", {})
        if kind.namespaced:
            meta.setdefault("namespace", "default")
        if client.peek(kind.kind, meta.get("namespace"), meta["name"]) is None:
            meta.setdefault("annotations", {})[LAST_APPLIED] = json.dumps(doc, separators=(",", ":")) + "\n"
            client.create(kind.kind, doc)


def _controller_pod(client: Client, node: str) -> str:
    """The Trainer controller as a Pod: on the embedded cluster it is the controller process
    itself, Running and Ready for as long as the API that shows it answers. An earlier start's
    goes (it is kept on disk like every pod)."""
    for pod in client.list("Pod", TRAINER_NAMESPACE, labels=TRAINER_MANAGER_LABELS):
        client.delete("Pod", TRAINER_NAMESPACE, pod["metadata"]["name"], grace=0)
    pid, now = os.getpid(), client.now()
    pod = client.create("Pod", {
        "metadata": {"generateName": "kubeflow-trainer-controller-manager-", "namespace": TRAINER_NAMESPACE,
                     "labels": dict(TRAINER_MANAGER_LABELS),
                     "annotations": {CONTROLLER_POD_ANNOTATION: str(pid), MIRROR_ANNOTATION: str(pid)}},
        "spec": {"containers": [{"name": "manager", "image": "kfcockpit.io/embedded-controller:local",
                                 "command": ["python", "-m", "backend.local.controller"]}],
                 "nodeName": node, "restartPolicy": "Always",
                 # The control plane outlives any node: never evicted from the one it is shown on.
                 "tolerations": [{"operator": "Exists"}]}})
    container = {"name": "manager", "image": "kfcockpit.io/embedded-controller:local", "imageID": "",
                 "ready": True, "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}},
                 "containerID": f"process://{pid}"}
    pod["status"].update({"phase": "Running", "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
                          "podIPs": [{"ip": "127.0.0.1"}], "startTime": now, "containerStatuses": [container],
                          "conditions": [{"type": kind, "status": "True", "lastTransitionTime": now}
                                         for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]})
    client.update_status("Pod", pod)
    return pod["metadata"]["name"]
