"""Where the embedded cluster keeps things under the state root, and atomic file writes.

    <home>/cluster/
      controller.lock   flock held by the one controller (its pid inside)
      start.lock        flock clients take while they start a controller
      controller.sock   the controller's API (list, watch, logs, apply...)
      controller.log    the controller's own output
      stopped           present after `kfcockpit cluster down`: nothing starts a controller by itself
      objects/<group>/<plural>/<namespace>/<name>.json   the API's stored objects (apiserver/store.py)
      pki/, api-port    the API server's certificates and token, and the port it had
      node.json         the node's allocatable cpu/memory when `cluster up --cpus/--memory` set them
      status/<job>.json              observed state of a TrainJob and its pods
      logs/<job>/<pod>.log           every line a pod printed: "<epoch seconds> <text>"
      volumes/<claim>/               a PersistentVolumeClaim's files
      snapshots/<name>/              snapshot.json + data/ (hard links into the volume's files)
"""

from __future__ import annotations

import os
from pathlib import Path

from backend.cluster import InvalidResource, NotFound
from backend.models import check_name

# Unix socket paths are limited to 108 bytes; longer ones are reached through /proc/self/fd.
_SUN_PATH_MAX = 100


class Layout:
    def __init__(self, home: Path):
        self.home = Path(home).expanduser().absolute()
        self.root = self.home / "cluster"
        self.lock = self.root / "controller.lock"
        self.start_lock = self.root / "start.lock"
        self.socket = self.root / "controller.sock"
        self.controller_log = self.root / "controller.log"
        self.stopped = self.root / "stopped"
        self.resources = self.root / "resources"  # an earlier version's desired state (migrated)
        self.objects = self.root / "objects"
        self.node_file = self.root / "node.json"  # the node's CPU and memory, when set at `cluster up`
        self.status = self.root / "status"
        self.logs = self.root / "logs"
        self.volumes = self.root / "volumes"
        self.snapshots = self.root / "snapshots"

    def create(self) -> None:
        for d in (self.resources, self.status, self.logs, self.volumes, self.snapshots):
            d.mkdir(parents=True, exist_ok=True)

    def object_file(self, kind: str, name: str, namespace: str = "default") -> Path:
        """Where the API store keeps an object of one of the served kinds."""
        from backend.local.registry.kinds import KINDS

        found = next(k for k in KINDS if k.kind == kind and k.group != "metrics.k8s.io")
        return (self.objects / (found.group or "core") / found.plural / (namespace if found.namespaced else "_cluster")
                / f"{name}.json")

    def claim_files(self, namespace: str = "default") -> list[Path]:
        return sorted(self.object_file("PersistentVolumeClaim", "x", namespace).parent.glob("*.json"))

    def job_status_file(self, job: str) -> Path:
        return self.status / f"{job}.json"

    def pod_log(self, job: str, pod: str) -> Path:
        return self.logs / job / f"{pod}.log"

    def volume_dir(self, name: str) -> Path:
        """The directory of a volume, refusing names that could point outside the state root."""
        return _inside(self.volumes, name, "volume")

    def snapshot_dir(self, name: str) -> Path:
        return _inside(self.snapshots, name, "snapshot")

    def require_volume(self, name: str) -> Path:
        path = self.volume_dir(name)
        if not self.object_file("PersistentVolumeClaim", name).exists() or not path.is_dir():
            raise NotFound(f"volume {name!r} not found (apply its PersistentVolumeClaim first, "
                           "e.g. kubectl apply -f manifests/volume.yaml)")
        return path


def _inside(parent: Path, name: str, what: str) -> Path:
    try:
        check_name(name, f"{what} name")
    except ValueError as exc:
        raise InvalidResource(str(exc)) from None
    path = (parent / name).resolve()
    if path.parent != parent.resolve():  # a symlink planted in the state root
        raise InvalidResource(f"{what} {name!r} resolves outside the state root ({path})")
    return path


def socket_address(path: Path) -> tuple[str, int | None]:
    """(address to bind/connect, directory fd to close afterwards) for a Unix socket path.

    Paths longer than sun_path allows are reached through an O_PATH descriptor of their
    directory: /proc/self/fd/N/<name> resolves to the same file, and is short."""
    text = str(path)
    if len(text.encode()) <= _SUN_PATH_MAX:
        return text, None
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{path.name}", fd


