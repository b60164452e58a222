"""The checkpoint layout, readable without torch.

A checkpoint is two files side by side:

    ckpt-step-000015.pt     a plain torch.save of the training state: a user opens it with
                            torch.load(path, weights_only=True), no project code needed
    ckpt-step-000015.json   {"step": 15, "world_size": 2, "loss": 0.08, "bytes": N,
                             "crc32": "...", "created": ..., "reason": "periodic", "rank": 0,
                             "device": "cuda:0"}

The JSON sidecar lets the cockpit's checkpoint browser show step, loss and world size without
torch, and its size and checksum tell a complete data file from a torn or corrupt one. `device` is
the writer's ("cpu", "cuda:0"); the tensors in the file are on the CPU whatever it says (a sidecar
without it predates GPU training: "cpu"). The checksum is a CRC-32 (format 3): what it guards
against is a torn or lost write, which a CRC catches as zip and gzip rely on, on a restart's path
(a survivor's save). zlib-ng computes it, 0.05 s per GB here; the standard library's zlib gives
the same value at 0.26-0.33 s per GB where zlib-ng is missing (sha256 took 0.6 s). It proves
nothing against someone who rewrites the file, who could rewrite the sidecar beside it as well.
Sidecars of format 2 name a sha256 instead; both are read. Both files are written to a temp name
(`.ckpt-step-000015.pt.tmp-<pid>-<random>`) and renamed into place, the sidecar last: the sidecar is the
commit mark, so a data file without one is an unfinished save and never a checkpoint. A periodic
save is fsynced after its commit (training.checkpoint.write_files says why).

One writer per step: a writer first claims the step by creating `.ckpt-step-000015.claim`
exclusively (survivors of a failed group may race to save the same step). The claim names its
holder; a claim whose holder died (a rank killed mid-save) is taken over by the next generation,
`.ckpt-step-000015.claim.1`, created exclusively too (see `claim`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from training import metrics
from training.atomic import process_tag
from training.process_start import start_ticks

NAME_RE = re.compile(r"^ckpt-step-(\d{6,})\.pt$")
FORMAT = 3
_CHUNK = 8 * 1024 * 1024
CHECKSUMS = ("crc32", "sha256")  # what a sidecar may name: this format's, then format 2's


try:  # the same CRC-32 as zlib's, five times faster; a worker image without it still reads and writes
    from zlib_ng.zlib_ng import crc32 as _crc32
except ImportError:  # pragma: no cover - the venv and the pinned images carry zlib-ng
    _crc32 = zlib.crc32


class Crc32:
    """The checksum a save writes, taken piece by piece (hashlib's face: update, hexdigest)."""

    name = "crc32"

    def __init__(self) -> None:
        self.value = 0

    def update(self, data) -> None:
        self.value = _crc32(data, self.value)  # both let go of the GIL on large buffers

    def hexdigest(self) -> str:
        return f"{self.value:08x}"


def _new_checksum(name: str):
    return Crc32() if name == "crc32" else hashlib.new(name)


def file_name(step: int) -> str:
    return f"ckpt-step-{step:06d}.pt"


def sidecar_path(data: Path) -> Path:
    return data.with_suffix(".json")


def temp_name(step: int, writer: str) -> str:
    """The name a checkpoint of `step` is written under by `writer` (training.atomic.process_tag)."""
    return f".{file_name(step)}.tmp-{writer}"


_TEMP_RE = re.compile(r"^\.ckpt-step-(\d{6,})\.pt\.tmp-[0-9a-f-]+$")


def claim_name(step: int, generation: int = 0) -> str:
    name = f".ckpt-step-{step:06d}.claim"
    return f"{name}.{generation}" if generation else name


def claim_names(directory: Path, step: int) -> list[Path]:
    """Every generation of the claim of `step` present in `directory`."""
    return list(directory.glob(f"{claim_name(step)}*"))


def is_leftover(name: str) -> bool:
    """A temp file or claim of a save that did not finish (safe to remove when no writer runs)."""
    return name.startswith(".ckpt-step-") and (".tmp-" in name or ".claim" in name)


class InvalidCheckpoint(Exception):
    """The file is not a complete, intact checkpoint; the message says why in a few words."""


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    step: int
    world_size: int
    loss: float | None
    size_bytes: int
    created: float | None
    valid: bool
    problem: str = ""
    device: str = "cpu"  # the writer's


def claim(directory: Path, step: int) -> bool:
    """True if this process is now the only writer of `step`: it created the step's claim, or
    took over from a holder that is dead.

    Whoever creates a claim file exclusively holds it; the file names the holder. A holder killed
    mid-save (a rank dying while its writer thread streams a periodic checkpoint) would otherwise
    block the survivors from saving that step. Liveness is decided only where it can be: for a
    holder in this machine's process table (same host name, boot and pid namespace: the ranks of
    one torchrun, or the Ray workers of one node); its pid must still run the process that started
    when the claim was made (start time checked, so a reused pid is not taken for it). A holder in
    another pod or host is assumed alive: its volume is shared, its process table is not, and a
    lease would need heartbeats and a wait longer than survivors get. Taking over creates the next
    generation's file exclusively, so of several survivors that find the same dead holder, one wins.
    """
    me = json.dumps(_this_process()).encode()
    generation = 0
    while True:
        path = directory / claim_name(step, generation)
        if _create_exclusive(path, me):
            return True
        if _holder_alive(path):
            return False
        generation += 1


def abandoned_temp(directory: Path) -> Path | None:
    """The data file of a save whose writer died mid-way (every holder of its step's claim known
    dead, see `claim`): garbage, whose pages were being written a moment ago. None if none is."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for name in names:
        found = _TEMP_RE.match(name)
        if found is None:
            continue
        claims = claim_names(directory, int(found.group(1)))
        if claims and not any(_holder_alive(held) for held in claims):
            return directory / name
    return None


def release(directory: Path, step: int) -> None:
    """Drop every claim of `step` (after its save failed, or when the step is pruned)."""
    for path in claim_names(directory, step):
        path.unlink(missing_ok=True)


def _create_exclusive(path: Path, content: bytes) -> bool:
    """Create `path` holding `content`, atomically and only if it does not exist.

    The content goes to a temp file that is then hard-linked to the name: link fails if the name
    exists (on NFS too, unlike O_EXCL on old servers), and a reader never sees a claim half written."""
    tmp = path.with_name(f"{path.name}.tmp-{process_tag()}")
    tmp.write_bytes(content)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _machine() -> dict:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:  # not Linux: no liveness check, every holder counts as alive
        boot = pidns = ""
    return {"host": socket.gethostname(), "boot": boot, "pidns": pidns}


def _this_process() -> dict:
    return dict(_machine(), pid=os.getpid(), start=start_ticks(os.getpid()))


def _holder_alive(path: Path) -> bool:
    """False only for a holder known dead: on this machine, its process gone. A claim file that
    vanished (pruned) or cannot be read counts as held."""
    try:
        holder = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return True
    here = _machine()
    if not isinstance(holder, dict) or not here["boot"] or any(holder.get(k) != here[k] for k in here):
        return True
    return start_ticks(int(holder["pid"])) == holder.get("start")


def write_sidecar(data: Path, meta: dict) -> None:
    """Commit a data file already renamed into place: its sidecar, atomically, then the directory."""
    metrics.write_json(sidecar_path(data), dict(meta, format=FORMAT, file=data.name))
    fsync_dir(data.parent)


def write_checkpoint(directory: Path, meta: dict, payload: bytes) -> Path:
    """A whole checkpoint from bytes in memory (tests and tools; training streams its own)."""
    data = directory / file_name(int(meta["step"]))
    data.write_bytes(payload)
    checksum = Crc32()
    checksum.update(payload)
    write_sidecar(data, dict(meta, bytes=len(payload), crc32=checksum.hexdigest()))
    return data


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_meta(data: Path) -> dict:
    """The sidecar of a data file; raises InvalidCheckpoint when it is missing or unreadable."""
    try:
        meta = json.loads(sidecar_path(data).read_text())
    except FileNotFoundError:
        raise InvalidCheckpoint("no metadata sidecar (save not finished)") from None
    except ValueError as exc:
        raise InvalidCheckpoint(f"unreadable metadata ({exc})") from None
    if not isinstance(meta, dict) or "bytes" not in meta or not any(name in meta for name in CHECKSUMS):
        raise InvalidCheckpoint("metadata without size and checksum")
    return meta


def checksum_name(meta: dict) -> str:
    """The checksum a sidecar (read_meta's) gives: crc32, or an older format's sha256."""
    return next(name for name in CHECKSUMS if name in meta)


class Checksums:
    """Checksums of files already read, by identity, for one owner that verifies the same files
    again (a checkpoint is never modified in place once committed; a pruned file written over under
    a temp name changes its mtime), so it does not read gigabytes twice. Whoever walks checkpoints
    repeatedly holds one for as long as it does; at most `limit` files are remembered, the least
    recently verified forgotten first."""

    LIMIT = 64  # many times the checkpoints a run keeps

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._known: OrderedDict[tuple[str, int, int, int, int], str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._known)

    def of(self, path: Path, name: str = "crc32") -> str:
        st = path.stat()
        key = (name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        digest = self._known.pop(key, None)
        if digest is None:
            digest = file_checksum(path, name)
        self._known[key] = digest
        if len(self._known) > self.limit:
            self._known.popitem(last=False)
        return digest


def file_checksum(path: Path, name: str = "crc32") -> str:
    """The checksum `name` (CHECKSUMS) of a whole file, as its sidecar writes it (read now)."""
    checksum = _new_checksum(name)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            checksum.update(chunk)
    return checksum.hexdigest()


def writer_machine() -> dict:
    """What the sidecar says of the machine that wrote it: its host and boot."""
    machine = _machine()
    return {"host": machine["host"], "boot": machine["boot"]}


def verify_file(data: Path, trust_this_boot: bool = False, checksums: Checksums | None = None) -> dict:
    """The sidecar after checking the data file's size and checksum; raises InvalidCheckpoint.

    `trust_this_boot`: a file written on this host since its last boot is checked by size alone.
    The checksum guards against a write the machine lost (a survivor's save is not fsynced: a power
    cut or kernel crash can tear it); while the kernel that took the write still runs, its page
    cache holds exactly what was written, so reading the whole file to check it (a fifth of a
    second per GB, on a restart's path) proves nothing more. Another host's file, or an earlier
    boot's, is read whole (once for a holder of `checksums`)."""
    meta = _whole_by_size(data)
    if trust_this_boot and written_this_boot(meta):
        return meta
    name = checksum_name(meta)
    if (checksums.of(data, name) if checksums is not None else file_checksum(data, name)) != meta[name]:
        raise InvalidCheckpoint("checksum mismatch")
    return meta


def _whole_by_size(data: Path) -> dict:
    """The sidecar of a committed data file as long as the sidecar says; raises InvalidCheckpoint."""
    meta = read_meta(data)
    size = data.stat().st_size
    if size != meta["bytes"]:
        raise InvalidCheckpoint(f"truncated: {size} of {meta['bytes']} bytes")
    return meta


def written_this_boot(meta: dict) -> bool:
    """The sidecar names this host and its current boot (see verify_file's trust_this_boot)."""
    here = writer_machine()
    return bool(here["boot"]) and all(meta.get(key) == here[key] for key in here)


def newest_trusted(directory: Path) -> Path | None:
    """The newest data file verify_file(trust_this_boot=True) accepts without reading it whole
    (committed, whole, written on this host since its boot), or None; silent, never slow."""
    for path in reversed(list_files(directory)):
        try:
            if written_this_boot(_whole_by_size(path)):
                return path
        except (InvalidCheckpoint, OSError):
            continue
    return None


def inspect(path: Path, verify: bool = True) -> CheckpointInfo:
    """What a browser shows of one data file. `verify` reads the whole file to check the checksum."""
    match = NAME_RE.match(path.name)
    step = int(match.group(1)) if match else -1
    try:
        size = path.stat().st_size
    except OSError as exc:  # pruned while we looked
        return CheckpointInfo(path, step, 0, None, 0, None, False, str(exc))
    try:
        meta = verify_file(path) if verify else read_meta(path)
    except (InvalidCheckpoint, OSError) as exc:
        return CheckpointInfo(path, step, 0, None, size, None, False, str(exc))
    return CheckpointInfo(
        path=path,
        step=int(meta.get("step", step)),
        world_size=int(meta.get("world_size", 0)),
        loss=meta.get("loss"),
        size_bytes=size,
        created=meta.get("created"),
        valid=True,
        device=str(meta.get("device", "cpu")),
    )


def list_files(directory: Path) -> list[Path]:
    """Checkpoint data files (never temp files), oldest step first; a sidecar may be missing."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if NAME_RE.match(p.name) and p.is_file()]
    return sorted(found, key=lambda p: int(NAME_RE.match(p.name).group(1)))
