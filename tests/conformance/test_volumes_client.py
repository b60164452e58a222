"""Volumes, snapshots and restores on the embedded cluster, through its Kubernetes API: kubectl
for what a user types, `KubeCluster` (backend/kube) on the kubeconfig for what the cockpit does.

Upstream behaviour followed, and where it is written:
- kubernetes pkg/apis/core/validation ValidatePersistentVolumeClaimSpec (validateDataSource:
  "must be 'PersistentVolumeClaim' when referencing the default apiGroup"; dataSource "must
  match dataSourceRef"), pkg/api/persistentvolumeclaim/util.go NormalizeDataSources (either one
  set is copied to the other).
- kubernetes-csi/external-provisioner pkg/controller/controller.go getSnapshotSource ("error
  getting snapshot NAME from api server: ... not found", "requested volume size N is less than
  the size M for the source snapshot NAME") and getPVCSource, wrapped by Provision as "error
  getting handle for DataSource Type KIND by Name NAME: ..."; sig-storage-lib-external-provisioner
  reports it as a Warning ProvisioningFailed event 'failed to provision volume with StorageClass
  "CLASS": ...' and the claim stays Pending until the provisioner succeeds on a retry.

Files are written straight into the volume's directory where a test needs a volume's contents
without running training: on the embedded cluster that directory is the volume (its storage
driver's backing store), so this is what a pod mounting it would have written.
"""

from __future__ import annotations

import json
import time

import pytest

from backend.errors import NotFound
from backend.local.layout import Layout
from training import checkpoint_format, metrics


def claim_yaml(name: str, storage: str = "1Gi", source: dict | None = None, source_ref: dict | None = None) -> str:
    # The shared class (ReadWriteMany, bound at once, as the lesson's volume): the default class's
    # claims wait for their first pod (WaitForFirstConsumer), which these tests do not start.
    spec: dict = {"accessModes": ["ReadWriteMany"], "storageClassName": "nfs-csi",
                  "resources": {"requests": {"storage": storage}}}
    if source is not None:
        spec["dataSource"] = source
    if source_ref is not None:
        spec["dataSourceRef"] = source_ref
    return json.dumps({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec})


def snapshot_yaml(name: str, claim: str) -> str:
    return json.dumps({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                       "metadata": {"name": name}, "spec": {"source": {"persistentVolumeClaimName": claim}}})


def from_snapshot(name: str) -> dict:
    return {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": name}


def get(kubectl, kind: str, name: str) -> dict:
    return json.loads(kubectl("get", kind, name, "-o", "json"))


def events(kubectl, name: str) -> list[tuple[str, str, str]]:
    found = json.loads(kubectl("get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json"))
    return [(e["type"], e["reason"], e["message"]) for e in found["items"]]


def first_event(kubectl, name: str, reason: str) -> None:
    """Return once an event of `reason` about `name` exists (following `kubectl get events -w`)."""
    watching = kubectl.popen("get", "events", "-w", "--field-selector", f"involvedObject.name={name}",
                             "-o", "custom-columns=REASON:.reason", "--no-headers")
    try:
        for line in watching.stdout:
            if line.strip() == reason:
                return
        raise AssertionError(f"the event watch ended without {reason}: {watching.stderr.read()}")
    finally:
        watching.kill()
        watching.wait()


def bound(kubectl, name: str) -> dict:
    """The claim once Bound (a restore is Pending while its files are copied)."""
    kubectl("wait", "--for=jsonpath={.status.phase}=Bound", f"pvc/{name}", "--timeout=300s")
    return get(kubectl, "pvc", name)


def replace_file(path, text: str) -> None:
    """As the training core writes: a new file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.tmp-test")
    tmp.write_text(text)
    tmp.replace(path)


def test_a_claim_restored_from_a_snapshot_starts_with_the_snapshots_files(embedded, kubectl):
    layout = Layout(embedded[0])
    kubectl("apply", "-f", "-", input=claim_yaml("vr-source"))
    bound(kubectl, "vr-source")
    source = layout.claim_dir("default", "vr-source")
    (source / "run").mkdir()
    (source / "run" / "a.txt").write_text("before")
    (source / "keep.txt").write_text("kept")
    kubectl("apply", "-f", "-", input=snapshot_yaml("vr-snap", "vr-source"))
    kubectl("wait", "--for=jsonpath={.status.readyToUse}=true", "volumesnapshot/vr-snap", "--timeout=300s")
    snapshot = get(kubectl, "volumesnapshot", "vr-snap")
    assert snapshot["status"]["readyToUse"] is True
    # The snapshot controller's binding: a VolumeSnapshotContent that points back at it.
    content = get(kubectl, "volumesnapshotcontent", snapshot["status"]["boundVolumeSnapshotContentName"])
    assert content["spec"]["volumeSnapshotRef"]["name"] == "vr-snap"
    assert content["spec"]["driver"] == "kfcockpit.io/shared-dir" and content["status"]["readyToUse"] is True

    replace_file(source / "run" / "a.txt", "after")  # later writes to the source volume
    (source / "new.txt").write_text("new")
    kubectl("apply", "-f", "-", input=claim_yaml("vr-restored", storage=snapshot["status"]["restoreSize"],
                                                 source=from_snapshot("vr-snap")))

    claim = bound(kubectl, "vr-restored")
    assert claim["spec"]["dataSourceRef"] == from_snapshot("vr-snap")  # NormalizeDataSources
    restored = layout.claim_dir("default", "vr-restored")
    assert sorted(str(p.relative_to(restored)) for p in restored.rglob("*")) == ["keep.txt", "run", "run/a.txt"]
    assert (restored / "run" / "a.txt").read_text() == "before"
    assert [r for _, r, _ in events(kubectl, "vr-restored")] == ["Provisioning", "ProvisioningSucceeded"]
    # A restored volume is anyone's to write, in place too: the snapshot does not change.
    with open(restored / "keep.txt", "a") as f:
        f.write(" and changed")
    assert (layout.snapshot_data("default", "vr-snap") / "keep.txt").read_text() == "kept"
    assert (source / "keep.txt").read_text() == "kept"

    kubectl("delete", "volumesnapshot", "vr-snap")
    assert "NotFound" in kubectl.fails("get", "volumesnapshotcontent",
                                       snapshot["status"]["boundVolumeSnapshotContentName"])
    assert (restored / "run" / "a.txt").read_text() == "before"  # the restore outlives its snapshot
    kubectl("delete", "pvc", "vr-restored", "vr-source")


def test_a_claim_naming_a_missing_snapshot_stays_pending_until_it_is_taken(embedded, kubectl):
    kubectl("apply", "-f", "-", input=claim_yaml("vr-early", source=from_snapshot("vr-later")))
    first_event(kubectl, "vr-early", "ProvisioningFailed")
    assert get(kubectl, "pvc", "vr-early")["status"]["phase"] == "Pending"
    assert events(kubectl, "vr-early")[-1] == (
        "Warning", "ProvisioningFailed",
        'failed to provision volume with StorageClass "nfs-csi": error getting handle for DataSource Type '
        "VolumeSnapshot by Name vr-later: error getting snapshot vr-later from api server: "
        'volumesnapshots.snapshot.storage.k8s.io "vr-later" not found')
    with pytest.raises(NotFound):
        Layout(embedded[0]).claim_dir("default", "vr-early")

    kubectl("apply", "-f", "-", input=claim_yaml("vr-later-src"))
    bound(kubectl, "vr-later-src")
    (Layout(embedded[0]).claim_dir("default", "vr-later-src") / "x.txt").write_text("x")
    kubectl("apply", "-f", "-", input=snapshot_yaml("vr-later", "vr-later-src"))
    # The snapshot is taken, and the claim waiting for it provisioned from it.
    bound(kubectl, "vr-early")
    assert (Layout(embedded[0]).claim_dir("default", "vr-early") / "x.txt").read_text() == "x"
    kubectl("delete", "pvc", "vr-early", "vr-later-src")
    kubectl("delete", "volumesnapshot", "vr-later")


def test_a_restore_smaller_than_the_snapshot_stays_pending(embedded, kubectl):
    kubectl("apply", "-f", "-", input=claim_yaml("vr-big", storage="2Gi"))
    kubectl("apply", "-f", "-", input=snapshot_yaml("vr-big-snap", "vr-big"))
    kubectl("wait", "--for=jsonpath={.status.readyToUse}=true", "volumesnapshot/vr-big-snap", "--timeout=300s")
    # restoreSize is the source volume's size, as csi-hostpath reports it.
    assert get(kubectl, "volumesnapshot", "vr-big-snap")["status"]["restoreSize"] == "2Gi"
    kubectl("apply", "-f", "-", input=claim_yaml("vr-small", storage="1Gi", source=from_snapshot("vr-big-snap")))
    first_event(kubectl, "vr-small", "ProvisioningFailed")
    assert get(kubectl, "pvc", "vr-small")["status"]["phase"] == "Pending"
    assert events(kubectl, "vr-small")[-1][1:] == (
        "ProvisioningFailed",
        'failed to provision volume with StorageClass "nfs-csi": error getting handle for DataSource Type '
        "VolumeSnapshot by Name vr-big-snap: requested volume size 1073741824 is less than the size 2147483648 "
        "for the source snapshot vr-big-snap")
    kubectl("delete", "pvc", "vr-small", "vr-big")
    kubectl("delete", "volumesnapshot", "vr-big-snap")


def test_a_pod_waits_for_its_claim_to_be_provisioned(embedded, kubectl):
    """As kube-scheduler's VolumeBinding: Pending (Unschedulable) while its claim is unbound."""
    kubectl("apply", "-f", "-", input=claim_yaml("vr-awaited", source=from_snapshot("vr-awaited-snap")))
    kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vr-waiting"},
        "spec": {"restartPolicy": "Never",
                 "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "vr-awaited"}}],
                 "containers": [{"name": "c", "image": "local", "volumeMounts": [{"name": "d", "mountPath": "/data"}],
                                 "command": ["cat", "/data/x.txt"]}]}}))
    kubectl("wait", "--for=condition=PodScheduled=false", "pod/vr-waiting", "--timeout=300s")
    pod = get(kubectl, "pod", "vr-waiting")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["conditions"][0]["message"].startswith(
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.")

    kubectl("apply", "-f", "-", input=claim_yaml("vr-awaited-src"))
    bound(kubectl, "vr-awaited-src")
    (Layout(embedded[0]).claim_dir("default", "vr-awaited-src") / "x.txt").write_text("restored")
    kubectl("apply", "-f", "-", input=snapshot_yaml("vr-awaited-snap", "vr-awaited-src"))
    kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/vr-waiting", "--timeout=300s")
    assert kubectl("logs", "vr-waiting") == "restored\n"
    kubectl("delete", "pod", "vr-waiting")
    kubectl("delete", "pvc", "vr-awaited", "vr-awaited-src")
    kubectl("delete", "volumesnapshot", "vr-awaited-snap")


def test_data_source_rules_of_the_api_server(kubectl):
    core_group = kubectl.fails("apply", "-f", "-", input=claim_yaml(
        "vr-bad", source={"kind": "VolumeSnapshot", "name": "s"}))
    assert "spec.dataSource: Invalid value: \"VolumeSnapshot\": must be 'PersistentVolumeClaim' when " \
           "referencing the default apiGroup" in core_group
    mismatch = kubectl.fails("apply", "-f", "-", input=claim_yaml(
        "vr-bad", source=from_snapshot("a"), source_ref=from_snapshot("b")))
    assert "must match dataSourceRef" in mismatch
    no_name = kubectl.fails("apply", "-f", "-", input=claim_yaml(
        "vr-bad", source_ref={"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot"}))
    assert "spec.dataSourceRef.name: Required value" in no_name
    assert "NotFound" in kubectl.fails("get", "pvc", "vr-bad")


def test_a_claim_cloned_from_another_claim(embedded, kubectl):
    layout = Layout(embedded[0])
    kubectl("apply", "-f", "-", input=claim_yaml("vr-origin"))
    bound(kubectl, "vr-origin")
    (layout.claim_dir("default", "vr-origin") / "ckpt").write_text("weights")
    clone = {"kind": "PersistentVolumeClaim", "name": "vr-origin"}
    kubectl("apply", "-f", "-", input=claim_yaml("vr-clone", source_ref=clone))
    claim = bound(kubectl, "vr-clone")
    assert claim["spec"]["dataSource"] == clone
    replace_file(layout.claim_dir("default", "vr-origin") / "ckpt", "newer")
    assert (layout.claim_dir("default", "vr-clone") / "ckpt").read_text() == "weights"

    kubectl("apply", "-f", "-", input=claim_yaml("vr-clone-small", storage="1Mi", source=clone))
    first_event(kubectl, "vr-clone-small", "ProvisioningFailed")
    assert get(kubectl, "pvc", "vr-clone-small")["status"]["phase"] == "Pending"
    assert events(kubectl, "vr-clone-small")[-1][2].endswith(
        "Type PersistentVolumeClaim by Name vr-origin: error, new PVC request must be greater than or equal in "
        "size to the specified PVC data source, requested 1048576 but source is 1073741824")
    kubectl("delete", "pvc", "vr-clone", "vr-clone-small", "vr-origin")


def kube_cluster(embedded):
    """The cockpit's kube backend on the embedded cluster, as its default platform (issue 13):
    pipelines run locally with kfp.local, so no Pipelines endpoint."""
    from backend.connect import capabilities
    from backend.kube.cluster import KubeCluster
    from backend.settings import Settings

    settings = Settings(backend="local", home=embedded[0], kubeconfig=embedded[1], context="kfcockpit")
    return KubeCluster.from_settings(settings, capabilities(settings))


def finished_run(directory, loss: float, steps: int) -> None:
    """What a finished run leaves: checkpoints in training's format, then its metrics.json."""
    directory.mkdir(parents=True)
    for step in (steps // 2, steps):
        checkpoint_format.write_checkpoint(directory, {"step": step, "world_size": 2, "loss": loss,
                                                       "created": time.time()}, b"w" * 64 * step)
    metrics.write_json(directory / metrics.FILE_NAME, {
        "final_loss": loss, "steps": steps, "world_size": 2, "wall_seconds": 1.5, "resumes": 0,
        "launcher": "torchrun", "loss_history": [1.0, loss], "params_sha256": "ab" * 32})


async def test_the_kube_backend_snapshots_a_volume_and_reads_it_back(embedded, kubectl):
    cluster = kube_cluster(embedded)
    layout = Layout(embedded[0])
    kubectl("apply", "-f", "-", input=claim_yaml("vr-kube"))
    bound(kubectl, "vr-kube")
    finished_run(layout.claim_dir("default", "vr-kube") / "run-a", loss=0.25, steps=4)

    assert "vr-kube" in [v.name for v in await cluster.volumes()]
    checkpoints = await cluster.checkpoints("vr-kube")
    assert [(c.run, c.step, c.valid) for c in checkpoints] == [("run-a", 2, True), ("run-a", 4, True)]

    taken = await cluster.snapshot("vr-kube", "vr-kube-snap")
    assert taken.ready and taken.volume == "vr-kube" and taken.files == 5
    assert [(m.run, m.final_loss) for m in taken.metrics] == [("run-a", 0.25)]
    assert "vr-kube-snap" in [s.name for s in await cluster.snapshots()]

    # A second run lands on the volume after the snapshot: the snapshot still reads as it was.
    finished_run(layout.claim_dir("default", "vr-kube") / "run-b", loss=0.5, steps=2)
    in_snapshot = await cluster.read_metrics(snapshot="vr-kube-snap")
    assert [(m.run, m.final_loss, m.steps, m.loss_history) for m in in_snapshot] == [("run-a", 0.25, 4, [1.0, 0.25])]
    on_volume = await cluster.read_metrics(volume="vr-kube")
    assert [m.run for m in on_volume] == ["run-a", "run-b"]
    # The restore claim and the reader pods are gone once read.
    assert [v.name for v in await cluster.volumes() if v.name.startswith("kfcockpit-restore-")] == []
    assert json.loads(kubectl("get", "pods", "-l", "app.kubernetes.io/name=kfcockpit-reader", "-o", "json"))[
        "items"] == []
    await cluster.delete("VolumeSnapshot", "vr-kube-snap")
    await cluster.delete("PersistentVolumeClaim", "vr-kube")
    await cluster.close()


async def test_preflight_of_the_embedded_cluster_is_all_green(embedded, kubectl):
    cluster = kube_cluster(embedded)
    checks = await cluster.preflight()
    # the embedded cluster's own checks (its capabilities'), then any cluster's
    assert [c.name for c in checks] == ["controller", "warm-workers", "nodes", "snapshots-on-disk", "Kubernetes API",
                                        "Trainer controller", "Training runtime", "Pipelines endpoint",
                                        "Snapshot CRDs", "VolumeSnapshotClass"]
    assert [c for c in checks if not c.ok] == []
    found = {c.name: c.detail for c in checks}
    assert found["Pipelines endpoint"] == "none needed: pipelines run on this machine with kfp.local"
    assert found["nodes"] == "2 nodes: kfcockpit-worker, kfcockpit-worker2"  # no GPUs here, none simulated
    assert found["Trainer controller"].startswith("kubeflow-trainer-controller-manager-")
    await cluster.close()
    # That pod is the controller process itself: it can be looked at, not deleted.
    pod = found["Trainer controller"].split()[0]
    assert "controller process" in kubectl.fails("delete", "pod", "-n", "kubeflow-system", pod)
    assert "Running" in kubectl("get", "pod", "-n", "kubeflow-system", pod)
