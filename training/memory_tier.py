"""The node-memory tier: a survivor's save kept in the node's memory, so that a restart waits for
neither the volume's writes nor its reads.

Where the job gives `--memory-dir` (a directory of a tmpfs the node offers and keeps across the
group's recreation: backend/local/node/memory_area.py on the embedded cluster, a hostPath under
/dev/shm elsewhere), a survivor writes the interrupted step there instead of to the shared volume,
and leaves. On this machine the volume is a disk: a save written moments after a periodic one
waited on the kernel's writeback of the first (balance_dirty_pages; 8-11 s for a gigabyte, against
0.5 s into memory), and the group's teardown waits for the survivor to leave.

The copy is a checkpoint in the volume's format (data file, sidecar with size and CRC-32, claims),
one step per job per node: a newer one replaces it. The next group takes it only if it is complete
and its checksum holds (read whole on a thread while the group forms: `MemoryCopy`) and it is newer
than the volume's newest valid checkpoint; else the volume is used as before. Its holder (the
lowest rank that has it) reads it and sends the bytes to the other ranks over the process group,
as in-memory checkpointing systems restore from a peer's memory (Gemini, SOSP '23): the ranks on
other nodes cannot see it. The holder then copies it to the volume (`promote`, on a thread, fsynced:
the durable copy) and removes it.

What it may lose: between the survivor's save and the promotion the step lives only in that node's
memory. If the node goes (or the machine reboots), or no rank of the next group runs on it, the
restart takes the volume's newest checkpoint, up to --ckpt-every steps older.
"""

from __future__ import annotations

import io
import os
import shutil
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

from training import checkpoint_format as fmt
from training.loop import emit, raw_bytes

_READ_CHUNK = 64 << 20


class MemoryCopy:
    """The newest committed copy in a memory directory (its sidecar read at once: `step`), read
    into memory and checked against the sidecar's checksum on a thread started before the group
    forms. The bytes are sent to the other ranks as they are read (`chunks`); whether they were
    whole is known at the end (`verified`)."""

    def __init__(self, directory: Path, rank: int):
        self.directory, self.rank = directory, rank
        self.path: Path | None = None
        self.step = -1
        self.buffer: torch.Tensor | None = None
        self._meta: dict = {}
        self._read_to = 0
        self._valid = False
        self._progress = threading.Condition()
        self._released = threading.Event()
        self._thread = threading.Thread(target=self._read, name="memory-copy-read", daemon=True)
        files = fmt.list_files(directory)
        if not files:
            return
        try:
            self._meta = fmt.read_meta(files[-1])
            size = files[-1].stat().st_size
            if size != self._meta["bytes"]:
                raise fmt.InvalidCheckpoint(f"truncated: {size} of {self._meta['bytes']} bytes")
        except (fmt.InvalidCheckpoint, OSError) as exc:
            self._skipped(files[-1], exc)
            return
        self.path, self.step = files[-1], int(self._meta["step"])
        self.buffer = torch.empty(size, dtype=torch.uint8)
        self._thread.start()

    def _read(self) -> None:
        buffer = self.buffer  # held here: `release` may drop the attribute while this reads into it
        checksum, view = fmt.Crc32(), raw_bytes(buffer)
        try:
            with open(self.path, "rb", buffering=0) as f:
                for start in range(0, len(view), _READ_CHUNK):
                    if self._released.is_set():
                        return
                    chunk = view[start:start + _READ_CHUNK]
                    if f.readinto(chunk) != len(chunk):
                        raise fmt.InvalidCheckpoint("shorter than its size")
                    checksum.update(chunk)
                    with self._progress:
                        self._read_to = start + len(chunk)
                        self._progress.notify_all()
            if fmt.checksum_name(self._meta) != checksum.name or checksum.hexdigest() != self._meta[checksum.name]:
                raise fmt.InvalidCheckpoint("checksum mismatch")
            self._valid = True
        except (fmt.InvalidCheckpoint, OSError) as exc:
            self._skipped(self.path, exc)
        finally:
            with self._progress:
                self._read_to = len(view)  # nobody waits for bytes that will not come
                self._progress.notify_all()

    def _skipped(self, path: Path, exc: Exception) -> None:
        emit(event="checkpoint_skipped", file=path.name, tier="memory", reason=str(exc), rank=self.rank)

    def read_to(self, end: int) -> None:
        """Return once the bytes up to `end` are read (or the read ended)."""
        with self._progress:
            self._progress.wait_for(lambda: self._read_to >= end)

    def release(self) -> None:
        """Another rank sends the copy: stop reading this one."""
        self._released.set()
        self.buffer = None

    def verified(self) -> bool:
        """The whole copy was read and its checksum holds."""
        if self.path is not None:
            self._thread.join()
        return self._valid


def choose(memory_step: int, volume_step: int) -> tuple[int, int]:
    """(step, holder rank) of the memory copy the group takes, or (-1, -1): the volume's is newer or
    as new, or no rank has one. Every rank gives its own copy's step (committed and whole by size;
    its checksum is checked as it is sent); rank 0 also the volume's newest valid step (one
    all-gather, the same on every rank)."""
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return (memory_step, 0) if memory_step > volume_step else (-1, -1)
    on = _device()
    mine = torch.tensor([memory_step, volume_step], dtype=torch.int64, device=on)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    steps = [int(t[0]) for t in gathered]
    best, volume = max(steps), int(gathered[0][1])
    return (best, steps.index(best)) if best > volume else (-1, -1)


def share(copy: MemoryCopy | None, holder: int) -> dict | None:
    """The state in the holder's `copy` on every rank, its bytes sent as they are read; None on
    every rank if the holder found them broken (its checksum: the volume is used instead)."""
    buffer = copy.buffer if copy is not None else None
    if dist.is_initialized() and dist.get_world_size() > 1:
        on = _device()
        size = torch.tensor([buffer.numel() if buffer is not None else 0], dtype=torch.int64, device=on)
        dist.broadcast(size, src=holder)
        if buffer is None:
            buffer = torch.empty(int(size.item()), dtype=torch.uint8)
        for start in range(0, buffer.numel(), _READ_CHUNK):
            chunk = buffer[start:start + _READ_CHUNK]
            if copy is not None:
                copy.read_to(start + chunk.numel())
            sent = chunk if on.type == "cpu" else chunk.to(on)  # NCCL carries device tensors only
            dist.broadcast(sent, src=holder)
            if sent is not chunk:
                chunk.copy_(sent.cpu())
        whole = torch.tensor([int(copy is not None and copy.verified())], dtype=torch.int64, device=on)
        dist.broadcast(whole, src=holder)
        if not int(whole.item()):
            return None
    elif not copy.verified():
        return None
    return torch.load(_BytesReader(raw_bytes(buffer)), weights_only=True, map_location="cpu")


def _device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class _BytesReader(io.RawIOBase):
    """A file over bytes already in memory, read by torch.load into its tensors (no second copy)."""

    def __init__(self, view: memoryview):
        self.view, self.pos = view, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = max(0, min(len(b), len(self.view) - self.pos))
        memoryview(b).cast("B")[:n] = self.view[self.pos:self.pos + n]
        self.pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: len(self.view)}[whence]
        self.pos = base + offset
        return self.pos

    def tell(self) -> int:
        return self.pos


def promote(copy: Path, volume: Path, rank: int) -> None:
    """Copy a memory copy to the volume as a checkpoint of the same step (claimed, renamed, its
    sidecar committed, fsynced), then remove it from memory. Nothing if the volume has the step."""
    started = time.perf_counter()
    step = fmt.NAME_RE.match(copy.name).group(1)
    final = volume / copy.name
    if not fmt.sidecar_path(final).exists() and fmt.claim(volume, int(step)):
        meta = fmt.read_meta(copy)
        tmp = volume / fmt.temp_name(int(step), os.getpid())
        shutil.copyfile(copy, tmp)
        os.replace(tmp, final)
        # Committed, then synced, as a periodic save is (training.checkpoint.write_files says why).
        fmt.write_sidecar(final, {k: v for k, v in meta.items() if k not in ("format", "file")})
        emit(event="checkpoint_promoted", step=int(step), file=final.name, bytes=meta["bytes"],
             seconds=time.perf_counter() - started, rank=rank)
        with open(final, "rb") as f:
            os.fsync(f.fileno())
    drop(copy.parent)


def drop(directory: Path) -> None:
    """Remove every copy, claim and leftover of a memory directory (its contents, not itself)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        (directory / name).unlink(missing_ok=True)
