"""Volumes across nodes, as upstream's: the default class `standard` (kfcockpit.io/local-dir, a
node's directory, as kind's and csi-hostpath's) binds WaitForFirstConsumer: the claim waits
(a WaitForFirstConsumer event) until the scheduler picks its first pod's node, annotates it
volume.kubernetes.io/selected-node (pkg/scheduler/framework/plugins/volumebinding), and the
provisioner makes a PersistentVolume whose node affinity names that node, so every later pod that
mounts it goes there ("node(s) had volume node affinity conflict" elsewhere): a ReadWriteOnce
checkpoint volume puts both workers of a job on one node. The shared class nfs-csi (ReadWriteMany,
no node affinity) is what the lesson's volume uses, so its workers spread (tests/local/test_jobs.py);
a ReadWriteMany claim of the node-local class is refused by its provisioner. Snapshots work on
both (a VolumeSnapshotClass per driver)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from backend.models import JobPhase, PodPhase, parse_manifests
from tests.local.conftest import WAIT, apply_all, kubectl, lesson_job, lesson_resources, wait_for_pods


def _claim(home, tmp_path, name: str, modes: list[str]) -> None:
    manifest = tmp_path / f"{name}.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                                    "spec": {"accessModes": modes, "resources": {"requests": {"storage": "1Gi"}}}}))
    applied = kubectl(home, "apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr


def _job_on(claim: str, name: str):
    data = lesson_job(name, ckpt_dir=f"/checkpoints/{name}", steps=20, step_delay=0.05).to_manifest()
    pod_spec = data["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    pod_spec["volumes"][0]["persistentVolumeClaim"]["claimName"] = claim
    (job,) = parse_manifests(yaml.safe_dump(data))
    return job


async def test_a_node_local_rwo_volume_puts_every_worker_on_its_first_consumers_node(cluster, home, tmp_path):
    await apply_all(cluster, *lesson_resources())
    _claim(home, tmp_path, "pinned", ["ReadWriteOnce"])
    waiting = kubectl(home, "wait", "pvc/pinned", "--for=jsonpath={.status.phase}=Pending", "--timeout=30s")
    assert waiting.returncode == 0, waiting.stderr
    events = json.loads(kubectl(home, "get", "events", "--field-selector", "involvedObject.name=pinned",
                                "-o", "json").stdout)["items"]
    assert "WaitForFirstConsumer" in {e["reason"] for e in events}

    await cluster.apply(_job_on("pinned", "pinned-job"))
    running = await wait_for_pods(cluster, "pinned-job", lambda pods: len(pods) == 2 and all(
        p.phase == PodPhase.RUNNING for p in pods.values()))
    (node,) = {p.node for p in running}  # both on one node
    claim = json.loads(kubectl(home, "get", "pvc", "pinned", "-o", "json").stdout)
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    volume = json.loads(kubectl(home, "get", "pv", claim["spec"]["volumeName"], "-o", "json").stdout)
    (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]
    done = await cluster.wait_job("pinned-job", frozenset({JobPhase.COMPLETE}), WAIT)
    assert done.restart_attempt == 0

    # Snapshots work on either class: the node-local one's default VolumeSnapshotClass is its driver's.
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                                    "metadata": {"name": "pinned-snap"},
                                    "spec": {"source": {"persistentVolumeClaimName": "pinned"}}}))
    assert kubectl(home, "apply", "-f", str(snapshot)).returncode == 0
    ready = kubectl(home, "wait", "volumesnapshot/pinned-snap", "--for=jsonpath={.status.readyToUse}=true",
                    "--timeout=60s")
    assert ready.returncode == 0, ready.stderr
    taken = json.loads(kubectl(home, "get", "volumesnapshot", "pinned-snap", "-o", "json").stdout)
    assert taken["spec"]["volumeSnapshotClassName"] == "kfcockpit-snapclass"

    _claim(home, tmp_path, "many", ["ReadWriteMany"])
    assert "ReadWriteOnce only; for ReadWriteMany use a class every node mounts (nfs-csi)" in _first_event(
        home, "many", "ProvisioningFailed")
    shared = json.loads(kubectl(home, "get", "pvc", "checkpoints", "-o", "json").stdout)
    shared_volume = json.loads(kubectl(home, "get", "pv", shared["spec"]["volumeName"], "-o", "json").stdout)
    assert "nodeAffinity" not in shared_volume["spec"] and shared_volume["spec"]["accessModes"] == ["ReadWriteMany"]


def _first_event(home, name: str, reason: str) -> str:
    """The message of the first event of `reason` about `name`, following `kubectl get events -w`."""
    watching = subprocess.Popen([str(Path(sys.executable).parent / "kubectl"), "get", "events", "-w",
                                 "--field-selector", f"involvedObject.name={name},reason={reason}",
                                 "-o", "custom-columns=MESSAGE:.message", "--no-headers"],
                                stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, KUBECONFIG=str(home / "kubeconfig")))
    try:
        return next(watching.stdout)
    finally:
        watching.kill()
        watching.wait()
