"""The lesson's setup steps on Kubernetes: is each part there and working, and if not, the
command that fixes it. One Check per part; a part that cannot be inspected (forbidden, say)
is a failed check that says so, only an API server that does not answer is an error.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from backend.cluster import ClusterError, NotFound
from backend.kube.connection import MissingType
from backend.kube.resources import Resources
from backend.kube.snapshots import DEFAULT_STORAGE_CLASS_ANNOTATION, is_default, pick_class
from backend.models import DEFAULT_RUNTIME, Check

# The versions the install commands pin; manifests/install/install.sh uses the same ones.
TRAINER_VERSION = "v2.3.0"
PIPELINES_VERSION = "2.17.0"
SNAPSHOTTER_VERSION = "v8.6.0"
HOSTPATH_VERSION = "v1.18.0"
NFS_VERSION = "v4.11.0"  # csi-driver-nfs: the ReadWriteMany class nfs-csi of manifests/volume.yaml
KUBERAY_VERSION = "v1.7.0"  # manifests/install/kuberay
TRAINER_NAMESPACE = "kubeflow-system"
PIPELINES_NAMESPACE = "kubeflow"
DEFAULT_KFP_HOST = "http://localhost:8080"
CONTROLLER_SELECTOR = "app.kubernetes.io/name=trainer,app.kubernetes.io/component=manager"
SNAPSHOT_RESOURCES = ("volumesnapshots", "volumesnapshotclasses", "volumesnapshotcontents")
CHECKPOINT_VOLUME = "checkpoints"  # manifests/volume.yaml

INSTALL_TRAINER = ("kubectl apply --server-side -k "
                   f"'https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref={TRAINER_VERSION}'")
INSTALL_SNAPSHOTS = "manifests/install/install.sh snapshots"
INSTALL_NFS = "manifests/install/install.sh nfs"  # csi-driver-nfs with its VolumeSnapshotClass
NFS_DRIVER = "nfs.csi.k8s.io"
PORT_FORWARD_KFP = f"kubectl port-forward -n {PIPELINES_NAMESPACE} svc/ml-pipeline-ui 8080:80"


def _ready(pod: dict) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


async def check_controller(resources: Resources) -> Check:
    name = "Trainer controller"
    try:
        pods = await resources.list("Pod", label_selector=CONTROLLER_SELECTOR, namespace=TRAINER_NAMESPACE)
    except ClusterError as exc:
        return Check(name=name, ok=False, detail=f"cannot list pods in {TRAINER_NAMESPACE}: {exc}",
                     fix=INSTALL_TRAINER)
    ready = [p for p in pods if _ready(p)]
    if ready:
        return Check(name=name, ok=True,
                     detail=f"{ready[0]['metadata']['name']} is Running in {TRAINER_NAMESPACE}")
    if pods:
        pod = pods[0]
        phase = (pod.get("status") or {}).get("phase", "Unknown")
        return Check(name=name, ok=False,
                     detail=f"{pod['metadata']['name']} is {phase}, not ready, in {TRAINER_NAMESPACE}",
                     fix=f"kubectl -n {TRAINER_NAMESPACE} describe pod {pod['metadata']['name']}")
    return Check(name=name, ok=False, detail=f"no Trainer controller pod in {TRAINER_NAMESPACE}",
                 fix=INSTALL_TRAINER)


async def check_runtime(resources: Resources) -> Check:
    name = "Training runtime"
    fix = f"kubectl apply -n {resources.namespace} -f manifests/runtime.yaml"
    try:
        runtime = await resources.get("TrainingRuntime", DEFAULT_RUNTIME)
    except MissingType:
        return Check(name=name, ok=False, detail="the Trainer CRDs are not installed", fix=INSTALL_TRAINER)
    except NotFound:
        return Check(name=name, ok=False,
                     detail=f"TrainingRuntime {DEFAULT_RUNTIME} is not in namespace {resources.namespace}", fix=fix)
    except ClusterError as exc:
        return Check(name=name, ok=False, detail=str(exc), fix=fix)
    policy = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("failurePolicy") or {}
    restarts = int(policy.get("maxRestarts") or 0)
    if restarts < 1:
        return Check(name=name, ok=False, fix=fix,
                     detail=f"TrainingRuntime {DEFAULT_RUNTIME} has no failurePolicy.maxRestarts: "
                            "a killed worker would fail the job instead of restarting the group")
    return Check(name=name, ok=True, detail=f"TrainingRuntime {DEFAULT_RUNTIME} in {resources.namespace} "
                                            f"(group restarts up to {restarts})")


def _healthz(url: str) -> str:
    """'' when the Pipelines API answers, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 - the user's own endpoint
            return "" if response.status == 200 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return getattr(reason, "strerror", None) or " ".join(str(reason).split())


async def check_pipelines(kfp_host: str | None) -> Check:
    """`kfp_host` is where pipelines are submitted; None when they run on this machine with
    kfp.local (the embedded cluster's way: backend/pipelines/runs.py), which needs no endpoint."""
    if kfp_host is None:
        return Check(name="Pipelines endpoint", ok=True,
                     detail="none needed: pipelines run on this machine with kfp.local")
    host = kfp_host.rstrip("/")
    url = f"{host}/apis/v2beta1/healthz"
    problem = await asyncio.to_thread(_healthz, url)
    if not problem:
        return Check(name="Pipelines endpoint", ok=True, detail=f"Kubeflow Pipelines answers at {host}")
    fix = PORT_FORWARD_KFP if host == DEFAULT_KFP_HOST else f"check that {host} is the Pipelines API"
    return Check(name="Pipelines endpoint", ok=False, detail=f"{url}: {problem}",
                 fix=f"{fix} (not installed? manifests/install/install.sh pipelines)")


async def check_snapshot_crds(resources: Resources) -> Check:
    name = "Snapshot CRDs"
    try:
        body = await resources.conn.call_json(resources.custom.get_api_resources, "snapshot.storage.k8s.io", "v1",
                                              what="snapshot.storage.k8s.io/v1")
    except NotFound:
        return Check(name=name, ok=False, detail="the cluster does not serve snapshot.storage.k8s.io/v1",
                     fix=INSTALL_SNAPSHOTS)
    served = {r.get("name") for r in body.get("resources") or []}
    missing = [r for r in SNAPSHOT_RESOURCES if r not in served]
    if missing:
        return Check(name=name, ok=False, detail=f"missing: {', '.join(missing)}", fix=INSTALL_SNAPSHOTS)
    return Check(name=name, ok=True, detail="VolumeSnapshot, VolumeSnapshotClass and VolumeSnapshotContent served")


async def volume_driver(resources: Resources, claim: dict | None) -> tuple[str, str]:
    """(storage class name, provisioner) of a PVC, or of the default StorageClass."""
    classes = await resources.list("StorageClass")
    wanted = ((claim or {}).get("spec") or {}).get("storageClassName")
    for storage_class in classes:
        name = storage_class["metadata"]["name"]
        if (wanted and name == wanted) or (not wanted and is_default(storage_class, DEFAULT_STORAGE_CLASS_ANNOTATION)):
            return name, storage_class.get("provisioner", "")
    return wanted or "", ""


async def check_snapshot_class(resources: Resources) -> Check:
    name = "VolumeSnapshotClass"
    try:
        claim = await resources.find("PersistentVolumeClaim", CHECKPOINT_VOLUME)
        storage_class, driver = await volume_driver(resources, claim)
        classes = await resources.list("VolumeSnapshotClass")
    except MissingType:
        return Check(name=name, ok=False, detail="none: the snapshot CRDs are not installed", fix=INSTALL_SNAPSHOTS)
    except ClusterError as exc:
        return Check(name=name, ok=False, detail=str(exc), fix=INSTALL_SNAPSHOTS)
    whose = f"volume {CHECKPOINT_VOLUME}" if claim else "the default StorageClass"
    if not storage_class:
        return Check(name=name, ok=False, detail="the cluster has no default StorageClass", fix=INSTALL_SNAPSHOTS)
    class_name = pick_class(classes, driver)  # the class snapshot() would use
    if class_name:
        return Check(name=name, ok=True,
                     detail=f"{class_name} snapshots {whose} (StorageClass {storage_class}, driver {driver})")
    return Check(name=name, ok=False, fix=INSTALL_SNAPSHOTS,
                 detail=f"no VolumeSnapshotClass for driver {driver or '?'} of StorageClass {storage_class} "
                        f"({whose}): this cluster cannot snapshot it")


async def api_server(resources: Resources) -> Check:
    """The API server answers (raises Unavailable if not)."""
    from kubernetes import client

    conn = resources.conn
    version = await conn.call_json(client.VersionApi(conn.api).get_code, what="")
    return Check(name="Kubernetes API", ok=True,
                 detail=f"{version.get('gitVersion', '?')} at {conn.server} (context {conn.context}, "
                        f"namespace {conn.namespace})")


async def preflight(resources: Resources, kfp_host: str | None) -> list[Check]:
    first = await api_server(resources)
    rest = await asyncio.gather(check_controller(resources), check_runtime(resources), check_pipelines(kfp_host),
                                check_snapshot_crds(resources), check_snapshot_class(resources))
    return [first, *rest]
