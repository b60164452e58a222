"""A state root made by an earlier embedded cluster, brought to this one's layout (layout.py) when a
controller starts, so nothing of it is lost; one made by a later one refused in one line.

Layout 1 kept a claim's files in `volumes/<claim>` and a snapshot's in `snapshots/<name>`, one
per name across namespaces, and its jobs' observed state in `status/`. Layout 2 keys them by
namespace and uid: each claim's files move to `volumes/<namespace>/<its volumeName>` (claims of
the same name in several namespaces shared one directory: the oldest claim gets it, each other
one a copy, so none loses what it saw), a snapshot's to `snapshots/<its content>`, and a
directory no claim names to `volumes/_unclaimed/`. `status/` goes: the controllers re-derive
everything from the stored objects (an unfinished job starts again and resumes from its
checkpoints). Logs of layout 1 stay where they were, in `logs/<job>/`, no longer served.
"""

from __future__ import annotations

import logging
import os
import shutil

from backend.errors import ClusterError
from backend.local.layout import LAYOUT_VERSION, Layout
from backend.local.registry.store import Store

log = logging.getLogger("kfcockpit.controller")


def migrate(layout: Layout, store: Store) -> None:
    version = _version(layout)
    if version > LAYOUT_VERSION:
        raise ClusterError(f"the state root {layout.home} was made by a newer kfcockpit (layout {version}, this one "
                           f"knows {LAYOUT_VERSION}); use that version, or another --home")
    if version < 2:
        _claims(layout, store)
        _snapshots(layout, store)
        shutil.rmtree(layout.root / "status", ignore_errors=True)
        log.info("state root %s moved to layout %d", layout.root, LAYOUT_VERSION)
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.version_file.write_text(f"{LAYOUT_VERSION}\n")


def _version(layout: Layout) -> int:
    try:
        return int(layout.version_file.read_text().strip())
    except FileNotFoundError:
        earlier = (layout.root / "status").is_dir() or (layout.objects.is_dir() and layout.volumes.is_dir()
                                                         and any(layout.volumes.iterdir()))
        return 1 if earlier else LAYOUT_VERSION
    except (OSError, ValueError):
        return LAYOUT_VERSION + 1  # unreadable: not ours to touch


def _claims(layout: Layout, store: Store) -> None:
    kind = store.kinds.named("PersistentVolumeClaim")
    claims = sorted(store.list(kind), key=lambda c: c["metadata"].get("creationTimestamp") or "")
    namespaces = {c["metadata"]["namespace"] for c in claims}
    for entry in sorted(layout.volumes.iterdir()) if layout.volumes.is_dir() else []:
        if not entry.is_dir() or entry.is_symlink() or entry.name in namespaces or entry.name.startswith("_"):
            continue
        owners = [c for c in claims if c["metadata"]["name"] == entry.name]
        if not owners:
            _move(entry, layout.volumes / "_unclaimed" / entry.name)
            continue
        targets = [layout.volumes / c["metadata"]["namespace"] / (c.get("spec", {}).get("volumeName")
                                                                   or f"pvc-{c['metadata']['uid']}") for c in owners]
        for target in targets[1:]:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(entry, target, symlinks=True, dirs_exist_ok=True)
        _move(entry, targets[0])


def _snapshots(layout: Layout, store: Store) -> None:
    kind = store.kinds.named("VolumeSnapshot")
    for snapshot in store.list(kind):
        content = (snapshot.get("status") or {}).get("boundVolumeSnapshotContentName")
        old = layout.snapshots / snapshot["metadata"]["name"]
        if content and old.is_dir() and not (layout.snapshots / content).exists():
            (old / "snapshot.json").unlink(missing_ok=True)
            _move(old, layout.snapshots / content)


def _move(source, target) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)
    log.info("moved %s to %s", source, target)
