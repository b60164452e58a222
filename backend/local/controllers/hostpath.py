"""The storage driver's work on this machine's files, as csi-hostpath does it: a volume is a
directory, a snapshot a hard-linked tree, a restore or clone a copy.

A snapshot links every file of the volume into its `data` directory: O(files), not O(bytes).
That is exact for files that are never modified in place once written, which is how the
training core writes everything (checkpoints and metrics.json are written to a temp file and
renamed over; pruning unlinks, leaving the snapshot's link intact), except a run's records
(training/run_record.py), appended to while it runs: those few small files are copied. Temp files
of writes in flight are left out. The tree is built under a temp name and renamed into place, so a snapshot
exists complete or not at all.

A volume restored from a snapshot (or cloned from another volume) starts with copies of its
files, not links: a restored volume is anyone's to write, in place too, and such writes must
never reach the snapshot. `cp --reflink=auto` makes them (shared extents on btrfs and xfs, bytes
copied elsewhere), in a child process, so gigabytes never hold up the control plane's loop.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Awaitable, Callable

from backend.errors import InvalidResource
from training import run_record

DATA = "data"

RunChild = Callable[[list[str], Path], Awaitable[int]]  # (argv, output file) -> exit code


def _in_flight(name: str) -> bool:
    return name.startswith(".") and ".tmp-" in name


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


def take_snapshot(volume: Path, snapshot: Path) -> tuple[int, int]:
    """The volume's files as `snapshot`/data, whole or not at all; (files, bytes)."""
    tmp = snapshot.with_name(f".{snapshot.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        found = link_tree(volume, tmp / DATA)
        os.rename(tmp, snapshot)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InvalidResource(f"linking the volume's files failed: {exc.strerror or exc}") from None
    return found


def copy_command(source: Path, target: Path) -> list[str]:
    """The command that fills the existing, empty directory `target` with a copy of `source`'s
    tree: symlinks copied as links, modes and times kept, reflinks where the filesystem allows."""
    return ["cp", "-a", "--reflink=auto", "--", f"{source}{os.sep}.", str(target)]


async def fill(directory: Path, source: Path, run_child: RunChild) -> None:
    """The new volume `directory` as a copy of `source`, made in a temp directory renamed into
    place: it appears whole or not at all. InvalidResource in one line when the copy fails."""
    tmp = directory.with_name(f".{directory.name}.tmp-{os.getpid()}")
    errors = tmp.with_name(f"{tmp.name}.err")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        code = await run_child(copy_command(source, tmp), errors)
        if code != 0:
            last = (errors.read_text(errors="replace").strip().splitlines() or [f"cp exited with {code}"])[-1]
            raise InvalidResource(f"copying its data source failed: {last}")
        for dirpath, _dirs, names in os.walk(tmp):  # what a snapshot leaves out, a clone leaves out too
            for name in names:
                if _in_flight(name):
                    os.unlink(os.path.join(dirpath, name))
        os.rename(tmp, directory)
    except OSError as exc:
        raise InvalidResource(f"copying its data source failed: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        errors.unlink(missing_ok=True)
