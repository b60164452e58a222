"""A node's memory as pods reach it: a hostPath volume under /dev/shm.

On a real node /dev/shm is the machine's shared-memory tmpfs, and a hostPath directory there
outlives the pods that mount it: what the checkpoint memory tier (training/memory_tier.py) needs,
a survivor's save kept in memory across its group's recreation on the same node. The embedded
cluster's nodes share one machine, so each node gets a directory of its own under this machine's
/dev/shm (`kfcockpit-<cluster id>/<node>`), and a pod sees its own node's only. It goes when its
kubelet stops: a node that stops loses its memory, as a machine does. Other hostPaths are not
offered (None: the kubelet keeps treating them as before).
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from backend.errors import InvalidResource

SHM = PurePosixPath("/dev/shm")
MACHINE_SHM = Path("/dev/shm")


def root(cluster_id: str, node: str) -> Path:
    """The directory of this machine's tmpfs that is node `node`'s /dev/shm."""
    return MACHINE_SHM / f"kfcockpit-{cluster_id}" / node


def host_directory(area: Path, path: str) -> Path | None:
    """The directory of the node (whose area is `area`) behind a hostPath volume's `path`, made if
    missing (DirectoryOrCreate); None when `path` is not under /dev/shm or the machine has none."""
    wanted = PurePosixPath(path)
    if wanted != SHM and SHM not in wanted.parents:
        return None
    if ".." in wanted.parts:
        raise InvalidResource(f"hostPath {path!r}: '..' is not allowed")
    if not MACHINE_SHM.is_dir():
        return None
    directory = area.joinpath(*wanted.relative_to(SHM).parts)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def remove(area: Path) -> None:
    """The node stopped: its memory goes (and the cluster's directory, once no node has one)."""
    shutil.rmtree(area, ignore_errors=True)
    try:
        area.parent.rmdir()
    except OSError:
        pass
