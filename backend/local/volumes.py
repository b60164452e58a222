"""Volumes as directories, snapshots as hard-linked trees, and what is found in them.

A snapshot links every file of the volume into snapshots/<name>/data: O(files), not O(bytes).
That is exact for files that are never modified in place once written, which is how the
training core writes everything (checkpoints and metrics.json are written to a temp file and
renamed over; pruning unlinks, leaving the snapshot's link intact). Temp files of writes in
flight are left out. The tree is built under a temp name and renamed into place, so a snapshot
either exists complete, with its snapshot.json, or not at all.

A volume restored from a snapshot (or cloned from another volume) starts with copies of its
files, reflinked where the filesystem shares extents (btrfs, xfs): a restored volume is for
anyone to write to, in place too, and such writes must never reach the snapshot.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import time
from pathlib import Path

from backend.cluster import InvalidResource
from backend.local.layout import write_atomic
from backend.models import Checkpoint, RunMetrics, Snapshot
from training import checkpoint_format, metrics

META = "snapshot.json"
DATA = "data"


def _in_flight(name: str) -> bool:
    return name.startswith(".") and ".tmp-" in name


def project(directory: Path, data: dict[str, str]) -> None:
    """A ConfigMap's or Secret's data as files (one per key) in a fresh `directory`, as the
    kubelet projects such a volume."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for key, value in data.items():
        (directory / key).write_text(value)


def tree_size(root: Path) -> tuple[int, int]:
    """(files, bytes) of a directory tree, not following symlinks."""
    files = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            files += 1
            size += st.st_size
    return files, size


def _recreate(source: Path, target: Path, place) -> tuple[int, int]:
    """Recreate `source` under `target`, each regular file put there by `place(src, dst)`;
    symlinks copied as links, never followed out of the volume; in-flight temp files left out.
    (files, bytes) placed."""
    files = size = 0
    target.mkdir(parents=True)
    for dirpath, dirnames, filenames in os.walk(source):
        rel = os.path.relpath(dirpath, source)
        out = target if rel == "." else target / rel
        for name in list(dirnames):
            src = os.path.join(dirpath, name)
            if os.path.islink(src):
                os.symlink(os.readlink(src), out / name)
                dirnames.remove(name)
            else:
                (out / name).mkdir()
        for name in filenames:
            if _in_flight(name):
                continue
            src = os.path.join(dirpath, name)
            st = os.lstat(src)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(src), out / name)
            elif stat.S_ISREG(st.st_mode):
                place(src, out / name)
                files += 1
                size += st.st_size
    return files, size


def link_tree(source: Path, target: Path) -> tuple[int, int]:
    """Recreate `source` under `target` with hard links; (files, bytes) linked."""
    return _recreate(source, target, os.link)


_FICLONE = 0x40049409  # linux/fs.h: the copy shares the source's extents until either is written


def _clone_or_copy(src: str, dst: Path) -> None:
    with open(src, "rb") as fin, open(dst, "xb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
            cloned = True
        except OSError:  # ext4, tmpfs, another filesystem: bytes are copied
            cloned = False
    if not cloned:
        shutil.copyfile(src, dst)
    shutil.copystat(src, dst)


def copy_tree(source: Path, target: Path) -> tuple[int, int]:
    """Recreate `source` under `target` with copies (reflinks where possible); (files, bytes)."""
    return _recreate(source, target, _clone_or_copy)


def restore_volume(source: Path, volume_dir: Path) -> tuple[int, int]:
    """A new volume directory that starts with a copy of `source` (a snapshot's data, another
    volume). Built under a temp name and renamed into place: the volume appears whole or not
    at all. OSError when it cannot be made (no space, say)."""
    tmp = volume_dir.with_name(f".{volume_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        copied = copy_tree(source, tmp)
        os.rename(tmp, volume_dir)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return copied


def create_snapshot(volume_dir: Path, volume: str, snapshot_dir: Path) -> Snapshot:
    name = snapshot_dir.name
    if snapshot_dir.exists():
        raise InvalidResource(f"snapshot {name!r} already exists (delete it first: "
                              f"kfcockpit delete volumesnapshot {name})")
    tmp = snapshot_dir.with_name(f".{name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    started = time.time()
    try:
        files, size = link_tree(volume_dir, tmp / DATA)
        snap = Snapshot(name=name, volume=volume, created=started, files=files, size_bytes=size,
                        metrics=find_metrics(tmp / DATA))
        write_atomic(tmp / META, snap.model_dump_json(indent=2).encode())
        os.rename(tmp, snapshot_dir)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InvalidResource(f"snapshot {name!r} of volume {volume!r} failed: {exc.strerror or exc}") from None
    return snap


def read_snapshot(snapshot_dir: Path) -> Snapshot | None:
    try:
        return Snapshot.model_validate_json((snapshot_dir / META).read_text())
    except (OSError, ValueError):
        return None


def list_snapshots(snapshots_root: Path) -> list[Snapshot]:
    if not snapshots_root.is_dir():
        return []
    found = [read_snapshot(p) for p in sorted(snapshots_root.iterdir()) if not p.name.startswith(".")]
    return sorted((s for s in found if s), key=lambda s: s.created)


def _walk_dirs(root: Path):
    for dirpath, dirnames, _files in os.walk(root):
        dirnames.sort()
        yield Path(dirpath)


def find_metrics(root: Path) -> list[RunMetrics]:
    """metrics.json of every run below `root` (run = its directory relative to root)."""
    found = []
    for directory in _walk_dirs(root):
        data = metrics.read(directory)
        if not data:
            continue
        run = os.path.relpath(directory, root)
        try:
            found.append(RunMetrics(
                run="" if run == "." else run,
                final_loss=data["final_loss"], steps=data["steps"], world_size=data["world_size"],
                wall_seconds=data.get("wall_seconds", 0.0), resumes=data.get("resumes", 0),
                launcher=data.get("launcher", "torchrun"), loss_history=data.get("loss_history", []),
                params_sha256=data.get("params_sha256", ""),
            ))
        except (KeyError, ValueError, TypeError):
            continue  # a metrics.json the cockpit did not write
    return found


def list_checkpoints(volume_dir: Path, volume: str) -> list[Checkpoint]:
    """Every checkpoint file on a volume, each checked against its checksum."""
    found = []
    for directory in _walk_dirs(volume_dir):
        run = os.path.relpath(directory, volume_dir)
        run = "" if run == "." else run
        for path in checkpoint_format.list_files(directory):
            info = checkpoint_format.inspect(path, verify=True)
            found.append(Checkpoint(
                volume=volume, path=os.path.relpath(path, volume_dir), run=run, step=info.step,
                world_size=info.world_size, loss=info.loss, size_bytes=info.size_bytes,
                created=info.created, valid=info.valid, problem=info.problem,
            ))
    return found

