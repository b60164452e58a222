"""Volumes as directories, snapshots as hard-linked trees, and what is found in them.

A snapshot links every file of the volume into snapshots/<name>/data: O(files), not O(bytes).
That is exact for files that are never modified in place once written, which is how the
training core writes everything (checkpoints and metrics.json are written to a temp file and
renamed over; pruning unlinks, leaving the snapshot's link intact), except a run's records
(training/run_record.py), appended to while it runs: those few small files are copied. Temp files
of writes in flight are left out. The tree is built under a temp name and renamed into place, so a snapshot
either exists complete, with its snapshot.json, or not at all.

A volume restored from a snapshot (or cloned from another volume) starts with copies of its
files, not links: a restored volume is anyone's to write, in place too, and such writes must
never reach the snapshot. `cp --reflink=auto` makes them (shared extents on btrfs and xfs, bytes
copied elsewhere), in a child process of the controller (Controller.fill_volume).
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

from backend.cluster import InvalidResource
from training.atomic import write_atomic
from backend.models import Checkpoint, RunMetrics, Snapshot
from training import checkpoint_format, metrics, run_record

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


def link_tree(source: Path, target: Path) -> tuple[int, int]:
    """Recreate `source` under `target` with hard links; (files, bytes) linked."""
    files = size = 0
    target.mkdir(parents=True)
    for dirpath, dirnames, filenames in os.walk(source):
        rel = os.path.relpath(dirpath, source)
        out = target if rel == "." else target / rel
        for name in list(dirnames):
            src = os.path.join(dirpath, name)
            if os.path.islink(src):  # copied as a link, never followed out of the volume
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
                if os.path.basename(dirpath) == run_record.DIRECTORY:
                    shutil.copy2(src, out / name)  # appended in place: a link would keep growing
                else:
                    os.link(src, out / name)
                files += 1
                size += st.st_size
    return files, size


def copy_command(source: Path, target: Path) -> list[str]:
    """The command that fills the existing, empty directory `target` with a copy of `source`'s
    tree: symlinks copied as links, modes and times kept, reflinks where the filesystem allows."""
    return ["cp", "-a", "--reflink=auto", "--", f"{source}{os.sep}.", str(target)]


def drop_in_flight(root: Path) -> None:
    """Remove the temp files of writes that were in flight when a volume was copied: what a
    snapshot leaves out, a clone leaves out too."""
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if _in_flight(name):
                os.unlink(os.path.join(dirpath, name))


def create_snapshot(volume_dir: Path, volume: str, snapshot_dir: Path) -> Snapshot:
    name = snapshot_dir.name
    if snapshot_dir.exists():
        raise InvalidResource(f"snapshot {name!r} already exists (delete it first: "
                              f"kubectl delete volumesnapshot {name})")
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

