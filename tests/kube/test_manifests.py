"""Every manifest the cockpit ships or sends validates against its schema (no hand-written checks):
Kubeflow Trainer resources through the `kubeflow_trainer_api` models (from_dict must keep every
field: a field the v2.3 API does not have would be dropped, and the round trip would differ),
core Kubernetes types through kubernetes-validate (strict: unknown fields fail). VolumeSnapshot and
VolumeSnapshotClass have no schema package on the registries this project can install from, so
they are checked against the snapshot.storage.k8s.io/v1 types of backend/models/core.py, with unknown
fields refused as the API server's strict field validation does."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubeflow_trainer_api import models as trainer
from pydantic import ValidationError

from backend.kube import preflight
from backend.kube.reader import reader_pod
from backend.kube.snapshots import restore_claim, snapshot_manifest
from backend.models import VolumeSnapshot, VolumeSnapshotClass, parse_manifests, unknown_fields

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
# The oldest Kubernetes Kubeflow Trainer v2.3 supports.
KUBERNETES_VERSION = "1.31"


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("name, model", [("runtime.yaml", trainer.TrainerV1alpha1TrainingRuntime),
                                         ("trainjob.yaml", trainer.TrainerV1alpha1TrainJob)])
def test_trainer_manifests_round_trip_through_the_v2_3_api_models(name, model):
    (doc,) = documents(MANIFESTS / name)
    assert model.from_dict(doc).to_dict() == doc
    parse_manifests((MANIFESTS / name).read_text(), name)  # and both backends accept it


def core_objects() -> list[tuple[str, dict]]:
    source = {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-hostpath-sc",
                       "resources": {"requests": {"storage": "1Gi"}}}}
    snapshot = {"metadata": {"name": "run-a"}, "status": {"readyToUse": True, "restoreSize": "1Gi"}}
    return [("manifests/volume.yaml", documents(MANIFESTS / "volume.yaml")[0]),
            ("manifests/snapshots/storageclass.yaml", documents(MANIFESTS / "snapshots" / "storageclass.yaml")[0]),
            *((f"manifests/install/pipeline-runner-rbac.yaml {d['kind']}", d)
              for d in documents(MANIFESTS / "install" / "pipeline-runner-rbac.yaml")),
            ("the reader pod", reader_pod("kfcockpit-reader-abc123", "checkpoints", "kfcockpit-base:0.1.0")),
            ("the restore PVC", restore_claim("kfcockpit-restore-abc123", snapshot, source))]


@pytest.mark.parametrize("what, obj", core_objects(), ids=[w for w, _ in core_objects()])
def test_core_objects_validate_strictly(what, obj):
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_a_wrong_core_field_is_caught():
    pod = reader_pod("kfcockpit-reader-abc123", "checkpoints", "kfcockpit-base:0.1.0")
    pod["spec"]["containers"][0]["volumeMount"] = pod["spec"]["containers"][0].pop("volumeMounts")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)


def validate_snapshot_object(obj: dict) -> None:
    """Parse as the v1 snapshot type of its kind; every field must be one the type knows."""
    model = {"VolumeSnapshot": VolumeSnapshot, "VolumeSnapshotClass": VolumeSnapshotClass}[obj["kind"]]
    parsed = model.model_validate(obj)
    extra = unknown_fields(parsed)
    if extra:
        raise ValueError(f"unknown fields: {', '.join(extra)}")


def snapshot_objects() -> list[tuple[str, str, dict]]:
    contents = {"files": 3, "size_bytes": 4096, "metrics": [{"run": "lesson-ddp", "final_loss": 0.1,
                                                             "loss_history": [0.5, 0.1]}]}
    return [("manifests/snapshots/volumesnapshotclass.yaml", "volumesnapshotclasses",
             documents(MANIFESTS / "snapshots" / "volumesnapshotclass.yaml")[0]),
            ("manifests/snapshots/volumesnapshot.yaml", "volumesnapshots",
             documents(MANIFESTS / "snapshots" / "volumesnapshot.yaml")[0]),
            ("snapshot()'s VolumeSnapshot", "volumesnapshots",
             snapshot_manifest("checkpoints", "run-a", "csi-hostpath-snapclass", contents))]


@pytest.mark.parametrize("what, plural, obj", snapshot_objects(), ids=[w for w, _, _ in snapshot_objects()])
def test_snapshot_objects_validate_against_the_snapshot_v1_types(what, plural, obj):
    validate_snapshot_object(obj)
    assert obj["apiVersion"] == "snapshot.storage.k8s.io/v1"


def test_a_wrong_snapshot_field_is_caught():
    obj = documents(MANIFESTS / "snapshots" / "volumesnapshot.yaml")[0]
    obj["spec"]["source"]["persistentVolumeClaim"] = obj["spec"]["source"].pop("persistentVolumeClaimName")
    with pytest.raises(ValidationError):  # the required persistentVolumeClaimName is gone
        validate_snapshot_object(obj)
    obj = documents(MANIFESTS / "snapshots" / "volumesnapshot.yaml")[0]
    obj["spec"]["volumeSnapshotClass"] = obj["spec"].pop("volumeSnapshotClassName")
    with pytest.raises(ValueError, match=r"unknown fields: spec\.volumeSnapshotClass"):
        validate_snapshot_object(obj)
    klass = documents(MANIFESTS / "snapshots" / "volumesnapshotclass.yaml")[0]
    klass["deletionPolicy"] = "Keep"
    with pytest.raises(ValidationError):
        validate_snapshot_object(klass)


def test_install_pins_the_versions_preflight_names():
    script = (MANIFESTS / "install" / "install.sh").read_text()
    pinned = dict(re.findall(r"^([A-Z_]+_VERSION)=(\S+)$", script, re.M))
    assert pinned == {"TRAINER_VERSION": preflight.TRAINER_VERSION,
                      "PIPELINES_VERSION": preflight.PIPELINES_VERSION,
                      "SNAPSHOTTER_VERSION": preflight.SNAPSHOTTER_VERSION,
                      "HOSTPATH_VERSION": preflight.HOSTPATH_VERSION,
                      "NFS_VERSION": preflight.NFS_VERSION,
                      "KUBERAY_VERSION": preflight.KUBERAY_VERSION}
    refs = {}
    for kustomization in (MANIFESTS / "install").rglob("kustomization.yaml"):
        (doc,) = documents(kustomization)
        for resource in doc["resources"]:
            if "://" not in resource:  # a file beside the kustomization (kuberay's Namespace)
                assert (kustomization.parent / resource).is_file()
                continue
            repo, ref = re.fullmatch(r"https://github\.com/([^/]+/[^/.]+)(?:\.git)?/\S+\?ref=(\S+)", resource).groups()
            refs.setdefault(repo, set()).add(ref)
    assert refs == {"kubeflow/trainer": {preflight.TRAINER_VERSION},
                    "kubeflow/pipelines": {preflight.PIPELINES_VERSION},
                    "kubernetes-csi/external-snapshotter": {preflight.SNAPSHOTTER_VERSION},
                    "ray-project/kuberay": {preflight.KUBERAY_VERSION}}
    subprocess.run(["bash", "-n", str(MANIFESTS / "install" / "install.sh")], check=True)


def test_install_exits_0_when_every_tool_it_calls_succeeds(tmp_path):
    """Every step, with kubectl, git, docker and kind replaced by stubs that succeed: the script
    must exit 0 (its RETURN trap used to fire again after main, `src: unbound variable`, exit 1)."""
    calls = tmp_path / "calls.log"
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("kubectl", "docker", "kind"):
        (stubs / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\n')
    # git clone ... DIR: leave the deploy scripts where install.sh runs them (csi-hostpath's, csi-driver-nfs's).
    scripts = ("deploy/kubernetes-latest/deploy.sh", "deploy/install-driver.sh")
    (stubs / "git").write_text(f'#!/bin/sh\necho "git $*" >> "{calls}"\nfor last; do :; done\n' + "".join(
        f'mkdir -p "$(dirname "$last/{script}")"\n'
        f'printf \'#!/bin/sh\\necho {Path(script).name} $* >> "{calls}"\\n\' > "$last/{script}"\n'
        f'chmod +x "$last/{script}"\n' for script in scripts))
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{stubs}:{os.environ['PATH']}", KUBECTL=str(stubs / "kubectl"))
    done = subprocess.run(["bash", str(MANIFESTS / "install" / "install.sh")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "unbound variable" not in done.stderr
    log = calls.read_text()
    for expected in ("apply --server-side -k", "deploy.sh", "install-driver.sh v4.11.0 local", "nfs-server.yaml",
                     "manifests/nfs/storageclass.yaml", "kuberay", "docker build", "kind load docker-image"):
        assert expected in log, expected
    bad = subprocess.run(["bash", str(MANIFESTS / "install" / "install.sh"), "nope"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
