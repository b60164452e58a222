"""Where the embedded cluster keeps things under the state root.

    <home>/kubeconfig                context kfcockpit -> https://127.0.0.1:<port>, bearer token (0600)
    <home>/ray/                      Ray's files of the RayJobs' drivers (short: Ray's socket paths)
    <home>/cluster/                  the state root, 0700; every stored object 0600
      controller.lock   flock held by the one controller (its pid inside)
      start.lock        flock clients take while they start a controller
      controller.sock   the controller's life-cycle socket (ping, up, shutdown)
      controller.log    the controller's own output
      stopped           present after `kfcockpit cluster down`: nothing starts a controller by itself
      layout-version    which layout of this directory the files follow (migrate.py)
      objects/<group>/<plural>/<namespace>/<name>.json   the stored objects (registry/store.py)
      pki/, api-port    the API server's certificates and token, and the port it had
      cluster.json      the cluster's shape (shape.py): nodes, their resources and GPUs, the node
                        lifecycle's timings, as `cluster up` chose them (node.json: an older one's)
      volumes/<namespace>/<volume>/  a PersistentVolumeClaim's files (its volumeName, pvc-<uid>)
      snapshots/<content>/data/      a VolumeSnapshot's files (hard links), by its content's name
      logs/<namespace>/<pod>_<uid>/<container>/<restart>.log   every line a pod printed
      projected/<namespace>/<pod uid>/<volume>/                a pod's ConfigMap, Secret, emptyDir files

Everything of a namespaced object is under its namespace (or its uid), so two namespaces with
objects of the same names never share a file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from backend.errors import InvalidResource, NotFound
from backend.models import check_name

LAYOUT_VERSION = 2
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
        self.version_file = self.root / "layout-version"
        self.objects = self.root / "objects"
        self.shape_file = self.root / "cluster.json"  # the cluster's shape, as `cluster up` chose it
        self.logs = self.root / "logs"
        self.volumes = self.root / "volumes"
        self.snapshots = self.root / "snapshots"
        self.projected = self.root / "projected"
        self.ray = self.home / "ray"

    def create(self) -> None:
        """The state root, its owner's alone (0700, an older root's mode corrected): it holds the
        admin token, the signing key, Secrets and every namespace's volumes."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        for d in (self.logs, self.volumes, self.snapshots):
            d.mkdir(parents=True, exist_ok=True)

    def volume_dir(self, namespace: str, volume: str) -> Path:
        """The directory of a volume, refusing names that could point outside the state root."""
        return _inside(_inside(self.volumes, namespace, "namespace"), volume, "volume")

    def snapshot_dir(self, content: str) -> Path:
        return _inside(self.snapshots, content, "snapshot")

    def stored(self, plural: str, namespace: str, name: str, group: str = "core") -> dict | None:
        """An object as the store keeps it on disk (what a process other than the controller can
        read: a kfp.local task, a test), or None."""
        try:
            return json.loads((self.objects / group / plural / namespace / f"{name}.json").read_text())
        except (OSError, ValueError):
            return None

    def claim_dir(self, namespace: str, claim: str) -> Path:
        """The directory of a bound claim's volume; NotFound when there is none."""
        check_name(claim, "volume name")
        obj = self.stored("persistentvolumeclaims", namespace, claim) or {}
        volume = (obj.get("spec") or {}).get("volumeName")
        path = self.volume_dir(namespace, volume) if volume else None
        if path is None or not path.is_dir():
            raise NotFound(f"volume {claim!r} not found in namespace {namespace} (apply its PersistentVolumeClaim "
                           "first, e.g. kubectl apply -f manifests/volume.yaml)")
        return path

    def snapshot_data(self, namespace: str, snapshot: str) -> Path:
        """The files of a ready VolumeSnapshot; NotFound when there are none."""
        obj = self.stored("volumesnapshots", namespace, snapshot, "snapshot.storage.k8s.io") or {}
        content = (obj.get("status") or {}).get("boundVolumeSnapshotContentName")
        path = self.snapshot_dir(content) / "data" if content else None
        if path is None or not path.is_dir():
            raise NotFound(f"snapshot {snapshot!r} not found in namespace {namespace}")
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
