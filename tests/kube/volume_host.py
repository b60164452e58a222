"""Plays the node side of the in-process API server (apiserver.py) for volumes: kubelet running the
reader pod, the CSI hostpath driver provisioning claims as directories, the snapshot controller
copying them, the pvc-protection controller letting a deleted claim go.

Claims are directories under `root/volumes`; snapshots are copies under `root/snapshots`. A
reader pod runs its real command (`python -m backend.kube.volume_reader /data`) with /data
being the claim's directory; its output becomes the pod's log.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

from tests.kube.apiserver import InProcessApi
from tests.kube.objects import PODS, now_rfc3339

CLAIMS, SNAPSHOTS = "PersistentVolumeClaim", "VolumeSnapshot"
REPO = Path(__file__).resolve().parents[2]


class VolumeHost:
    def __init__(self, api: InProcessApi, root: Path) -> None:
        self.api = api
        self.root = root
        self.unpullable: set[str] = set()  # images whose pull fails (ImagePullBackOff)
        self.threads: list[threading.Thread] = []
        api.on_write.append(self._written)

    def claim_dir(self, claim: str) -> Path:
        return self.root / "volumes" / claim

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=30)

    def _written(self, method: str, kind: str, obj: dict) -> None:
        if method == "DELETE":
            if kind == CLAIMS:
                self._release(obj)
            return
        work = {PODS: self._run_pod, CLAIMS: self._provision, SNAPSHOTS: self._take_snapshot}.get(kind)
        if work is not None:
            thread = threading.Thread(target=work, args=(obj,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _provision(self, claim: dict) -> None:
        name = claim["metadata"]["name"]
        source = (claim.get("spec") or {}).get("dataSource") or {}
        if source.get("kind") == "VolumeSnapshot":
            shutil.copytree(self.root / "snapshots" / source["name"], self.claim_dir(name))
        else:
            self.claim_dir(name).mkdir(parents=True, exist_ok=True)

        def bind(obj: dict) -> None:
            obj["status"] = {"phase": "Bound", "capacity": {"storage": "1Gi"}}

        self.api.update(CLAIMS, name, bind)

    def _release(self, claim: dict) -> None:
        """kube-controller-manager's pvc-protection controller: a claim being deleted loses its
        finalizer, and goes, once no pod uses it (the reader pods are gone by then)."""
        def unprotect(obj: dict) -> None:
            obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or []
                                             if f != "kubernetes.io/pvc-protection"]

        meta = claim["metadata"]
        if meta.get("deletionTimestamp"):
            self.api.through_registry(lambda client: client.mutate(CLAIMS, meta["namespace"], meta["name"], unprotect))

    def _take_snapshot(self, snapshot: dict) -> None:
        name = snapshot["metadata"]["name"]
        claim = snapshot["spec"]["source"]["persistentVolumeClaimName"]
        shutil.copytree(self.claim_dir(claim), self.root / "snapshots" / name)

        def ready(obj: dict) -> None:
            obj["status"] = {"readyToUse": True, "restoreSize": "1Gi", "creationTime": now_rfc3339(),
                             "boundVolumeSnapshotContentName": f"snapcontent-{name}"}

        self.api.update(SNAPSHOTS, name, ready)

    def _run_pod(self, pod: dict) -> None:
        name = pod["metadata"]["name"]
        container = pod["spec"]["containers"][0]
        if container["image"] in self.unpullable:
            def stuck(obj: dict) -> None:
                obj["status"] = {"phase": "Pending", "containerStatuses": [{
                    "name": container["name"], "restartCount": 0, "state": {"waiting": {
                        "reason": "ImagePullBackOff",
                        "message": f'Back-off pulling image "{container["image"]}"'}}}]}

            self.api.update(PODS, name, stuck)
            return
        mounts = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]}
        command = [sys.executable if part == "python" else part for part in container["command"]]
        for mount in container.get("volumeMounts") or []:
            directory = str(self.claim_dir(mounts[mount["name"]]))
            command = [directory if part == mount["mountPath"] else part for part in command]
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
        output = (result.stdout + result.stderr).splitlines()
        self.api.append_log(name, *output)
        self.api.close_log(name)
        code = result.returncode

        def finished(obj: dict) -> None:
            obj["status"] = {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [{
                "name": container["name"], "restartCount": 0, "state": {"terminated": {
                    "exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": now_rfc3339(), "finishedAt": now_rfc3339()}}}]}

        self.api.update(PODS, name, finished)
