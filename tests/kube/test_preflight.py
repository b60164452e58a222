"""preflight(): the lesson's setup steps on Kubernetes, each with the command that fixes it."""

from __future__ import annotations

from pathlib import Path

import yaml

from backend.local.apiserver import discovery
from backend.models import parse_manifests
from tests.kube.objects import PODS, pod_status

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
STORAGE_CLASSES, SNAPSHOT_CLASSES = "StorageClass", "VolumeSnapshotClass"
SNAPSHOT_TYPES = ("VolumeSnapshot", "VolumeSnapshotClass", "VolumeSnapshotContent")


def controller_pod(ready: bool = True) -> dict:
    return {"metadata": {"name": "kubeflow-trainer-controller-manager-7d9f-x2x", "namespace": "kubeflow-system",
                         "labels": {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager",
                                    "app.kubernetes.io/part-of": "kubeflow"}},
            "spec": {"containers": [{"name": "manager",
                                     "image": "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0"}]},
            "status": pod_status("Running" if ready else "Pending")}


def by_name(checks) -> dict:
    return {c.name: c for c in checks}


async def test_a_ready_cluster_passes_every_check(api, cluster):
    api.put(PODS, controller_pod(), namespace="kubeflow-system")
    for resource in parse_manifests((MANIFESTS / "runtime.yaml").read_text()):
        await cluster.apply(resource)
    for name, key in (("storageclass.yaml", STORAGE_CLASSES), ("volumesnapshotclass.yaml", SNAPSHOT_CLASSES)):
        api.put(key, yaml.safe_load((MANIFESTS / "snapshots" / name).read_text()))

    checks = await cluster.preflight()

    assert [c.name for c in checks] == ["Kubernetes API", "Trainer controller", "Training runtime",
                                        "Pipelines endpoint", "Snapshot CRDs", "VolumeSnapshotClass"]
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    found = by_name(checks)
    assert found["Kubernetes API"].detail.startswith(f"{discovery.VERSION['gitVersion']} at {api.url}")
    assert "group restarts up to 3" in found["Training runtime"].detail
    assert "csi-hostpath-snapclass" in found["VolumeSnapshotClass"].detail


async def test_an_empty_cluster_fails_each_check_with_its_fix(api, cluster):
    api.healthz_ok = False
    for kind in SNAPSHOT_TYPES:
        api.unserve(kind)
    api.put(STORAGE_CLASSES, {"metadata": {"name": "standard", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path"})

    found = by_name(await cluster.preflight())

    assert found["Kubernetes API"].ok
    assert not any(c.ok for name, c in found.items() if name != "Kubernetes API")
    assert found["Trainer controller"].detail == "no Trainer controller pod in kubeflow-system"
    assert found["Trainer controller"].fix == (
        "kubectl apply --server-side -k "
        "'https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0'")
    assert found["Training runtime"].fix == "kubectl apply -n default -f manifests/runtime.yaml"
    assert "HTTP 503" in found["Pipelines endpoint"].detail
    assert found["Snapshot CRDs"].fix == found["VolumeSnapshotClass"].fix == "manifests/install/install.sh snapshots"
    assert found["VolumeSnapshotClass"].detail == "none: the snapshot CRDs are not installed"


async def test_kinds_standard_class_cannot_snapshot(api, cluster):
    api.put(STORAGE_CLASSES, {"metadata": {"name": "standard", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path"})
    api.put(SNAPSHOT_CLASSES, yaml.safe_load((MANIFESTS / "snapshots" / "volumesnapshotclass.yaml").read_text()))
    check = by_name(await cluster.preflight())["VolumeSnapshotClass"]
    assert not check.ok and check.fix == "manifests/install/install.sh snapshots"
    assert check.detail == ("no VolumeSnapshotClass for driver rancher.io/local-path of StorageClass standard "
                            "(the default StorageClass): this cluster cannot snapshot it")


async def test_a_controller_that_is_not_ready_points_at_its_pod(api, cluster):
    api.put(PODS, controller_pod(ready=False), namespace="kubeflow-system")
    check = by_name(await cluster.preflight())["Trainer controller"]
    assert not check.ok and "is Pending" in check.detail
    assert check.fix.startswith("kubectl -n kubeflow-system describe pod kubeflow-trainer-controller-manager")
