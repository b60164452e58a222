"""The node-memory tier: a survivor's save kept in the node's memory, so that a restart waits for
neither the volume's writes nor its reads.

Where the job gives `--memory-dir` (a directory of a tmpfs the node offers and keeps across the
group's recreation: backend/local/node/memory_area.py on the embedded cluster, a hostPath under
/dev/shm elsewhere), a survivor writes the interrupted step there instead of to the shared volume,
and leaves. On this machine the volume is a disk: loaded, a save written moments after a periodic
one waited on the kernel's writeback of the first (balance_dirty_pages; 6-11 s for a gigabyte,
against 1-3 s into memory), and the group's teardown waits for the survivor to leave. Quiet, it
does not pay: sending the state to the other node's rank costs more than reading the volume's copy
(README gives the figures).

The copy is a checkpoint in the volume's format (data file, sidecar with size and CRC-32, claims),
one step per job per node: a newer one replaces it. The next group takes it only if it is complete
and its checksum holds (checked on a thread while the group forms: `MemoryCopy`) and it is newer
than the volume's newest valid checkpoint; else the volume is used as before. Its holder (the
lowest rank that has it) loads it and sends the state to the other ranks over the process group,
each tensor straight into the one the receiver allocated, as in-memory checkpointing systems
restore from a peer's memory (Gemini, SOSP '23): the ranks on other nodes cannot see it. The holder
then copies it to the volume (`promote`, on a thread, fsynced: the durable copy) and removes it.

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
from training.atomic import fsync_path, process_tag
from training.loop import emit
from training.nested_state import replace_tensors, tensors


class MemoryCopy:
    """The newest committed copy in a memory directory (its sidecar read at once: `step`), loaded
    and, beside that, checked against the sidecar's checksum, on threads started before the group
    forms (`state` waits for both)."""

    def __init__(self, directory: Path, rank: int):
        self.directory, self.rank = directory, rank
        self.path: Path | None = None
        self.step = -1
        self._meta: dict = {}
        self._state: dict | None = None
        self._valid = False
        self._threads = [threading.Thread(target=self._load, name="memory-copy-load", daemon=True),
                         threading.Thread(target=self._check, name="memory-copy-check", daemon=True)]
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
        for thread in self._threads:
            thread.start()

    def _load(self) -> None:
        try:  # read whole, not mapped: see training.checkpoint.load_state
            self._state = torch.load(self.path, weights_only=True, map_location="cpu")
        except Exception as exc:  # noqa: BLE001 - a broken file: the volume is used
            self._skipped(self.path, exc)

    def _check(self) -> None:
        name = fmt.checksum_name(self._meta)
        try:
            self._valid = fmt.file_checksum(self.path, name) == self._meta[name]
        except OSError as exc:
            self._skipped(self.path, exc)
            return
        if not self._valid:
            self._skipped(self.path, fmt.InvalidCheckpoint("checksum mismatch"))

    def _skipped(self, path: Path, exc: Exception) -> None:
        emit(event="checkpoint_skipped", file=path.name, tier="memory", reason=str(exc), rank=self.rank)

    def state(self) -> dict | None:
        """The state in the copy if it is whole and its checksum holds, else None."""
        if self.path is None:
            return None
        for thread in self._threads:
            thread.join()
        state, self._state = self._state, None
        return state if self._valid else None


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
    """The state in the holder's `copy` on every rank, or None on every rank if the holder found
    it broken (the volume is used instead). Its shape goes first (the state with each tensor on the
    meta device: shape and dtype, no data), then each tensor straight into the one a rank
    allocated."""
    state = copy.state() if copy is not None else None
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return state
    on = _device()
    shape = b""
    if state is not None:
        written = io.BytesIO()
        torch.save(replace_tensors(state, (torch.empty(t.shape, dtype=t.dtype, device="meta")
                                           for t in tensors(state))), written)
        shape = written.getvalue()
    size = torch.tensor([len(shape)], dtype=torch.int64, device=on)
    dist.broadcast(size, src=holder)
    if not int(size.item()):
        return None
    encoded = torch.frombuffer(bytearray(shape), dtype=torch.uint8) if shape else \
        torch.empty(int(size.item()), dtype=torch.uint8)
    _broadcast(encoded, holder, on)
    if state is None:
        skeleton = torch.load(io.BytesIO(bytes(encoded.tolist())), weights_only=True)
        state = replace_tensors(skeleton, (torch.empty_like(t, device="cpu") for t in tensors(skeleton)))
    for tensor in tensors(state):
        _broadcast(tensor, holder, on)
    return state


def _broadcast(tensor: torch.Tensor, holder: int, on: torch.device) -> None:
    if on.type == "cpu":
        dist.broadcast(tensor, src=holder)
        return
    sent = tensor.to(on)  # NCCL carries device tensors only
    dist.broadcast(sent, src=holder)
    tensor.copy_(sent.cpu())


def _device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def promote(copy: Path, volume: Path, rank: int) -> None:
    """Copy a memory copy to the volume as a checkpoint of the same step (claimed, renamed, its
    sidecar committed, fsynced), then retire it in memory. Nothing if the volume has the step."""
    started = time.perf_counter()
    step = fmt.NAME_RE.match(copy.name).group(1)
    final = volume / copy.name
    if not fmt.sidecar_path(final).exists() and fmt.claim(volume, int(step)):
        meta = fmt.read_meta(copy)
        tmp = volume / fmt.temp_name(int(step), process_tag())
        shutil.copyfile(copy, tmp)
        os.replace(tmp, final)
        # Committed, then synced, as a periodic save is (training.checkpoint.write_files says why).
        fmt.write_sidecar(final, {k: v for k, v in meta.items() if k not in ("format", "file")})
        emit(event="checkpoint_promoted", step=int(step), file=final.name, bytes=meta["bytes"],
             seconds=time.perf_counter() - started, rank=rank)
        fsync_path(final)
    retire(copy)


SPARE = ".spare"  # a retired copy's pages, for the next survivor's save to write over


def spare(directory: Path) -> Path | None:
    path = directory / SPARE
    return path if path.exists() else None


def retire(copy: Path) -> None:
    """The copy is on the volume: uncommit it and keep its file as the spare the next survivor's
    save writes over (filling tmpfs pages already there costs a fraction of allocating new ones,
    and a survivor's save is on the restart's path); anything else in the directory goes."""
    fmt.sidecar_path(copy).unlink(missing_ok=True)
    try:
        os.replace(copy, copy.parent / SPARE)
    except OSError:
        pass
    for name in os.listdir(copy.parent):
        if name != SPARE:
            (copy.parent / name).unlink(missing_ok=True)


def drop(directory: Path) -> None:
    """Remove every copy, claim and leftover of a memory directory (its contents, not itself)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        (directory / name).unlink(missing_ok=True)
