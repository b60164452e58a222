"""Checkpoints as files in a directory on the shared volume (the torchrun launcher's store).

The layout is `checkpoint_format`'s: a plain torch.save file plus a JSON sidecar. Rank 0 writes
the periodic checkpoints without stopping the loop: `save` hands the state to a writer thread that
first copies its tensors into buffers kept from save to save, while the loop already computes the
next step's gradients; the loop waits for that copy only before its next optimizer update
(`before_update`), the first moment the live tensors change. The thread then streams torch.save
through a CRC-32 into a temp file, renames it, writes the sidecar that commits it, fsyncs and
prunes to the newest `keep`. One save is in flight at a time. The loop's last save (`save_final`)
is written from the live tensors: no update follows it.

`save_now` is the survivor's save: any rank, synchronous, before the process exits. Every rank
of a data-parallel group holds the same state, so survivors of a peer failure may all try; the
first to claim the step writes it, the others leave it. It skips the fsync, and waits for a
periodic save in flight only until that one is committed: the group's restart waits for this
save, and at 1 GB an fsync was most of it (seconds per recovery). The next group
reads the file from the page cache anyway, and its rank 0 fsyncs the checkpoint it resumed from
in the background; if the machine goes down before that, the checksum rejects a torn file at the
next resume and an older, synced checkpoint is taken.

Resume picks the newest checkpoint whose checksum holds, reporting each one it skips in one line.

Whatever device trained, the file holds CPU tensors (the copy is made into CPU buffers, a
survivor's state is moved there before torch.save) and names its writer's device in the sidecar,
so plain `torch.load(path, weights_only=True)` opens it on a machine without a GPU. Loading reads
every tensor onto the CPU as well (a file saved elsewhere with device tensors opens too); the loop
then moves them onto its own device.
"""

from __future__ import annotations

import os
import queue
import resource
import threading
import time
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist
import torch.utils.serialization.config as serialization_config

from training import checkpoint_format as fmt
from training import memory_tier
from training.atomic import fsync_path, process_tag
from training.nested_state import replace_tensors, tensors
from training.loop import emit

# Fault injection for tests of the crash window: "crash_before_rename@15" makes the process die
# after the temp file of step 15 is written and before it is renamed into place;
# "crash_before_rename@15:periodic" only in the periodic save (a rank killed mid-save).
FAULT_ENV = "KFCOCKPIT_FAULT"

# The sidecar's CRC-32 is the checksum; torch's own zip CRC32 per record would be a second, slower
# pass over the same gigabyte (2.6 s instead of 3.6 s for 1 GB here). torch.load reads such files
# as usual.
serialization_config.save.compute_crc32 = False

NAME_BYTES = 4096  # the longest name `rank0_choice` carries: a path (Linux's PATH_MAX)
_SHARED_CHUNK = 1 << 16  # torch.save's writes at least this long are tensor data, read in place


class Superseded(Exception):
    """A periodic save given up for a survivor's save of a newer step (FileCheckpoints.save_now)."""


_WRITE_CHUNK = 64 << 20  # a superseded save stops within one of these (~20 ms here)


class _ChecksummingFile:
    """What torch.save writes through: the file, with the checksum and size taken on the way. The
    checksum runs on a thread of its own beside the writes (the CRC and write both let go of the GIL
    on large buffers): a restart waits for a survivor's save. torch.save hands over its headers
    in buffers it reuses (copied here) and a tensor's data as a view of its storage, which does
    not change until torch.save returns (read in place)."""

    def __init__(self, f, superseded: threading.Event | None = None):
        self.f, self.checksum, self.size = f, fmt.Crc32(), 0
        self._superseded = superseded
        self._chunks: queue.SimpleQueue = queue.SimpleQueue()
        self._summer = threading.Thread(target=self._sum, name="checkpoint-checksum", daemon=True)
        self._summer.start()

    def _sum(self) -> None:
        while (chunk := self._chunks.get()) is not None:
            self.checksum.update(chunk)

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self._chunks.put(view if view.nbytes >= _SHARED_CHUNK else bytes(view))
        self.size += view.nbytes
        for start in range(0, view.nbytes, _WRITE_CHUNK):
            if self._superseded is not None and self._superseded.is_set():
                raise Superseded()
            self.f.write(view[start:start + _WRITE_CHUNK])
        return view.nbytes

    def flush(self) -> None:
        self.f.flush()

    def hexdigest(self) -> str:
        """The checksum of everything written (waits for it to catch up)."""
        self._chunks.put(None)
        self._summer.join()
        return self.checksum.hexdigest()


def sidecar_meta(state: dict, reason: str, rank: int) -> dict:
    history = state["loss_history"]
    return {"step": int(state["step"]), "world_size": state["world_size"],
            "loss": history[-1] if history else None, "created": time.time(),
            "reason": reason, "rank": rank, "device": state.get("device", "cpu"), **fmt.writer_machine()}


def _take_for_reuse(old: Path | None, tmp: Path) -> bool:
    """Move `old` (a checkpoint about to be pruned, or the unfinished file of a writer that died)
    to `tmp`, to be written over in place. Its
    pages are in the page cache, and filling cached pages costs a fraction of allocating new ones
    (measured here on ext4: 0.1 s instead of 2.4 s per GB), as databases recycle old log segments.
    Only a file nothing else links: a snapshot's hard link must keep its bytes, so the link count
    is checked after the move (a hidden temp name, which a snapshot skips). False: write a new file."""
    if old is None:
        return False
    if fmt.NAME_RE.match(old.name):
        fmt.sidecar_path(old).unlink(missing_ok=True)  # uncommit first: it is no checkpoint from here on
    try:
        os.rename(old, tmp)
    except OSError:
        return False
    if os.stat(tmp).st_nlink != 1:
        os.unlink(tmp)  # a snapshot holds it: its bytes stay there, untouched
        return False
    return True


def write_files(directory: Path, state: dict, reason: str, rank: int, durable: bool = True,
                reuse: Path | None = None, on_commit: Callable[[], None] | None = None,
                superseded: threading.Event | None = None, tier: str | None = None) -> Path:
    """torch.save to a temp file (`reuse`'s file, written over, when it can be taken: see
    `_take_for_reuse`), rename, the sidecar that commits it, its `checkpoint_saved` line,
    `on_commit()`, then (if `durable`) the fsync. Once `superseded` is set the write stops
    (Superseded), leaving its temp file, named by step and pid, for the save that superseded it
    to write over.

    Committed before it is durable: a survivor's save waits for a periodic save in flight to be
    committed, never for its fsync (at 1 GB, seconds on a restart's path). If the machine goes
    down in between, the checksum rejects the torn file at the next boot's resume (verify_file
    reads every file an earlier boot wrote) and an older checkpoint is taken. The file is closed
    before the rename, which is when an NFS client sends its data to the server."""
    started = time.perf_counter()
    step = int(state["step"])
    final = directory / fmt.file_name(step)
    tmp = directory / fmt.temp_name(step, process_tag())
    with open(tmp, "r+b" if _take_for_reuse(reuse, tmp) else "wb") as f:
        summed = _ChecksummingFile(f, superseded)
        torch.save(on_cpu(state), summed)
        f.truncate()  # a reused file may have been longer
        f.flush()
        digest = summed.hexdigest()
    if os.environ.get(FAULT_ENV) in (f"crash_before_rename@{step}", f"crash_before_rename@{step}:{reason}"):
        os._exit(137)
    fmt.sidecar_path(final).unlink(missing_ok=True)  # re-saving a step: the old sidecar no longer applies
    os.replace(tmp, final)
    fmt.write_sidecar(final, dict(sidecar_meta(state, reason, rank), bytes=summed.size,
                                  **{summed.checksum.name: digest}))
    # Said once committed (the sidecar is what a resume takes), before anyone waiting on the commit
    # is told: a survivor that exits right after would otherwise leave a save with no line.
    emit(event="checkpoint_saved", step=step, reason=reason, file=final.name, bytes=summed.size,
         seconds=time.perf_counter() - started, rank=rank, **({"tier": tier} if tier else {}))
    if on_commit is not None:
        on_commit()
    if durable:
        fsync_path(final)
    return final


def save_once(directory: Path, state: dict, reason: str, rank: int, reuse: Path | None = None,
              tier: str | None = None) -> bool:
    """A survivor's save: write `state` unless its step is committed already or another writer
    still alive claimed it. True if this process wrote it."""
    committed = fmt.sidecar_path(directory / fmt.file_name(int(state["step"]))).exists
    if committed():
        return False
    # A claim taken over from a dead holder: it may have committed the step just before dying.
    if fmt.claim(directory, int(state["step"])) and not committed():
        write_files(directory, state, reason, rank, durable=False, reuse=reuse, tier=tier)  # synced by the next group
        return True
    return False


def sync_in_background(path: Path) -> None:
    """fsync a checkpoint (and its sidecar) off the training thread: a survivor's save is written
    without one. Cheap when the file is synced already."""

    def sync() -> None:
        for file in (path, fmt.sidecar_path(path)):
            fsync_path(file)

    threading.Thread(target=sync, name="checkpoint-sync", daemon=True).start()


def newest_valid(directory: Path, rank: int, checksums: fmt.Checksums | None = None) -> Path | None:
    """The newest checkpoint whose size and checksum hold; one line per checkpoint skipped. A file
    this machine wrote since it last booted is trusted by its size (fmt.verify_file)."""
    for path in reversed(fmt.list_files(directory)):
        try:
            fmt.verify_file(path, trust_this_boot=True, checksums=checksums)
            return path
        except (fmt.InvalidCheckpoint, OSError) as exc:
            emit(event="checkpoint_skipped", file=path.name, reason=str(exc), rank=rank)
    return None


def rank0_choice(name: str) -> str:
    """Rank 0's `name` on every rank of the group (a group of one keeps its own).

    A broadcast of the name's bytes, not broadcast_object_list: that one unpickles through numpy,
    which a bare torch install lacks. NCCL carries CUDA tensors only: there the bytes travel on
    this rank's GPU, the one training.device set."""
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return name
    encoded = name.encode()
    if len(encoded) > NAME_BYTES:
        raise ValueError(f"a checkpoint path of {len(encoded)} bytes is longer than {NAME_BYTES}: {name[:80]}...")
    on = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    buffer = torch.zeros(NAME_BYTES, dtype=torch.uint8)
    buffer[:len(encoded)] = torch.tensor(list(encoded), dtype=torch.uint8)
    buffer = buffer.to(on)
    dist.broadcast(buffer, src=0)
    return bytes(buffer.cpu().tolist()).rstrip(b"\0").decode()


def load_state(path: Path) -> dict:
    """The state in `path`, read into this process's memory (from the page cache, after a
    survivor's save or a first read). Not mapped: a mapped file's pages are copied one 4 KiB
    fault at a time on their first write, and Adam writes every one of its moments in the first
    step. At 1 GB that made the first step after a restart 1.0-1.2 s longer; reading the file
    whole costs 0.55 s (measured here), and the model takes the read tensors as they are."""
    return torch.load(path, weights_only=True, map_location="cpu")


def on_cpu(state: dict) -> dict:
    """`state` with every tensor on the CPU (those already there are not copied)."""
    return replace_tensors(state, (t.cpu() for t in tensors(state)))


class _Prefetch:
    """The newest checkpoint this host wrote, read on a thread while the group forms: at 1 GB the
    read is a restart's longest wait after the survivor's save, and forming the group is waiting
    for the peers' processes. Rank 0 still chooses after the group formed (`take` gives the state
    only if it read the file chosen)."""

    def __init__(self, directory: Path):
        self.path = fmt.newest_trusted(directory)
        self._state: dict | None = None
        self._thread = threading.Thread(target=self._read, name="checkpoint-prefetch", daemon=True)
        if self.path is not None:
            self._thread.start()

    def _read(self) -> None:
        try:
            self._state = load_state(self.path)
        except Exception:  # noqa: BLE001 - pruned or torn meanwhile: the chosen file is read anew
            self._state = None

    def take(self, chosen: Path) -> dict | None:
        if self.path is None:
            return None
        self._thread.join()
        state, self._state = self._state, None
        return state if chosen == self.path else None


class FileCheckpoints:
    def __init__(self, directory: Path, keep: int, rank: int, memory: Path | None = None):
        """`memory`: this job's directory in the node's memory, where a survivor saves (see
        training/memory_tier.py); None: survivors save to `directory`."""
        self.directory = directory
        self.keep = keep
        self.rank = rank
        self.memory = memory
        self._memory_copy: memory_tier.MemoryCopy | None = None
        self._promoting: threading.Thread | None = None
        self._writer: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._staged = threading.Event()
        self._staged.set()
        self._committed = threading.Event()  # the save in flight is a checkpoint (maybe not synced yet)
        self._committed.set()
        self._in_flight: int | None = None  # the step of the periodic save being written
        self._superseded = threading.Event()
        self._buffers: list[torch.Tensor] = []  # the copy of the last save, reused by the next
        self._prefetch: _Prefetch | None = None
        self._checksums = fmt.Checksums()  # of the files this store verified: each read once
        if rank == 0:
            directory.mkdir(parents=True, exist_ok=True)
            # Leftovers of a writer that died mid-save; no writer runs while a group starts.
            for stale in directory.iterdir():
                if fmt.is_leftover(stale.name):
                    stale.unlink(missing_ok=True)
        if memory is not None:
            try:
                memory.mkdir(parents=True, exist_ok=True)
                for stale in memory.iterdir():  # a survivor killed mid-save: no writer runs while a group starts
                    if fmt.is_leftover(stale.name):
                        stale.unlink(missing_ok=True)
            except OSError as exc:  # the node offers no memory here: survivors save to the volume
                emit(event="checkpoint_failed", tier="memory", reason=f"no memory directory: {exc}", rank=rank)
                self.memory = None

    def prefetch(self) -> None:
        """Start reading the checkpoint a resume will most likely take, and the memory copy if
        there is one (call before the group forms)."""
        self._prefetch = _Prefetch(self.directory)
        if self.memory is not None:
            self._memory_copy = memory_tier.MemoryCopy(self.memory, self.rank)

    def load_latest(self) -> dict | None:
        # Rank 0 chooses (after checking the checksum); the others load the file it names.
        found = newest_valid(self.directory, self.rank, self._checksums) if self.rank == 0 else None
        if found is not None:
            sync_in_background(found)
        if self.memory is not None:
            state = self._load_from_memory(int(fmt.NAME_RE.match(found.name).group(1)) if found else -1)
            if state is not None:
                return state
        chosen = rank0_choice(found.name if found else "")
        prefetched, self._prefetch = self._prefetch, None
        if not chosen:
            return None
        state = prefetched.take(self.directory / chosen) if prefetched is not None else None
        return state if state is not None else load_state(self.directory / chosen)

    def _load_from_memory(self, volume_step: int) -> dict | None:
        """The group's state from the newest verified memory copy, if one rank has one newer than
        the volume's `volume_step` (its holder sends it, then promotes it); else None, and a stale
        or broken copy here is removed. Every rank calls it (one all-gather; a broadcast if taken)."""
        copy, self._memory_copy = self._memory_copy, None
        if copy is None:
            copy = memory_tier.MemoryCopy(self.memory, self.rank)
        step, holder = memory_tier.choose(copy.step, volume_step)
        began = time.perf_counter()
        state = memory_tier.share(copy if self.rank == holder else None, holder) if holder >= 0 else None
        if state is None:  # none newer than the volume's, or the holder's was broken: the volume's
            if copy.path is not None or fmt.list_files(self.memory):
                memory_tier.drop(self.memory)
            return None
        # max_rss_mb: the memory tier's cost in this process (the copy's bytes beside the state they load)
        emit(event="checkpoint_memory_loaded", step=step, holder=holder, seconds=time.perf_counter() - began,
             rank=self.rank, max_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
        self._prefetch = None
        if self.rank == holder:
            self._promoting = threading.Thread(target=self._promote, args=(copy.path,), name="checkpoint-promote",
                                               daemon=True)
            self._promoting.start()
        return state

    def _promote(self, copy: Path) -> None:
        try:
            memory_tier.promote(copy, self.directory, self.rank)
        except OSError as exc:  # the copy stays in memory; the next periodic save is on the volume
            emit(event="checkpoint_failed", tier="memory", reason=f"promotion: {exc}", rank=self.rank)

    def drop_memory(self) -> None:
        """The job's end: its memory copies go (the volume keeps what it saved)."""
        if self.memory is not None:
            memory_tier.drop(self.memory)
            try:
                self.memory.rmdir()
            except OSError:
                pass

    def save(self, state: dict) -> None:
        """A periodic checkpoint (rank 0), written while training goes on."""
        self._start_writer(state, copy=True)

    def save_final(self, state: dict) -> None:
        """The loop's last checkpoint (rank 0): no update follows it, so it is written from the
        live tensors, without the copy a periodic save makes first (at 1 GB, 0.1-0.2 s more of
        the job's end, which waits for this save)."""
        self._start_writer(state, copy=False)

    def _start_writer(self, state: dict, copy: bool) -> None:
        if self.rank != 0:
            return
        self._wait_writer()
        self._staged.clear()
        self._committed.clear()
        self._superseded.clear()
        self._in_flight = int(state["step"])
        self._writer = threading.Thread(target=self._stage_and_write, args=(state, copy),
                                        name="checkpoint-writer", daemon=True)
        self._writer.start()

    def before_update(self) -> None:
        self._staged.wait()

    def save_now(self, state: dict, reason: str) -> None:
        """Save `state` before this process exits, unless a checkpoint of its step exists or
        another survivor claimed it. A periodic save in flight of an older step is given up and
        its file written over: this save supersedes it, and a restart waits for this one (at 1 GB
        the wait for the older one to commit was 0.7 s of a restart). One of the same step is
        waited for until it is committed, not synced: the process may leave during its fsync
        (see write_files). With a memory directory the save goes there, at once (see
        `_save_to_memory`)."""
        if self.memory is not None and self._save_to_memory(state, reason):
            return
        in_flight, step = self._in_flight, int(state["step"])
        if in_flight is not None and in_flight < step:
            self._superseded.set()
        self._committed.wait()
        self._release_copy()
        reuse = None
        if self._failure is not None:  # that save failed or was given up; this one may still succeed
            failure, self._failure = self._failure, None
            if isinstance(failure, Superseded):
                emit(event="checkpoint_superseded", step=in_flight, by=step, rank=self.rank)
                taken = self.directory / fmt.temp_name(in_flight, process_tag())
                reuse = taken if taken.exists() else None
            else:
                emit(event="checkpoint_failed", reason=str(failure), rank=self.rank)
        if save_once(self.directory, state, reason, self.rank, reuse=reuse or self._reusable(urgent=True)):
            self._prune()

    def _release_copy(self) -> None:
        """A survivor's save: no periodic save follows (the process leaves after it), and no writer
        reads their copy any more (committed, or given up). At 1 GB freeing it takes 0.07 s: on a
        thread of its own beside this save, not in the exit after it, which the restart waits for."""
        buffers, self._buffers = self._buffers, []
        if buffers:
            threading.Thread(target=buffers.clear, name="checkpoint-copy-free", daemon=True).start()

    def _save_to_memory(self, state: dict, reason: str) -> bool:
        """The survivor's save into the node's memory, the periodic save in flight given up (this
        process leaves; the next group cleans its files). False: saved nothing there (the volume
        has the step, or memory refused it), the volume's save follows."""
        step = int(state["step"])
        if fmt.sidecar_path(self.directory / fmt.file_name(step)).exists():
            return False
        self._superseded.set()
        try:
            if save_once(self.memory, state, reason, self.rank, reuse=memory_tier.spare(self.memory), tier="memory"):
                for older in fmt.list_files(self.memory)[:-1]:  # one step per job per node
                    fmt.sidecar_path(older).unlink(missing_ok=True)
                    older.unlink(missing_ok=True)
                    fmt.release(self.memory, int(fmt.NAME_RE.match(older.name).group(1)))
        except OSError as exc:  # a full tmpfs: the volume takes it
            emit(event="checkpoint_failed", tier="memory", reason=str(exc), rank=self.rank)
            return False
        return True

    def wait(self) -> None:
        """Block until the save in flight and a promotion are on disk; re-raise a save's error."""
        if self._promoting is not None:
            self._promoting.join()
            self._promoting = None
        self._wait_writer()

    def _wait_writer(self) -> None:
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        if self._failure is not None:
            failure, self._failure = self._failure, None
            if isinstance(failure, Superseded):  # by a memory save (_save_to_memory): nothing failed
                return
            raise failure

    def _stage_and_write(self, state: dict, copy: bool) -> None:
        try:
            try:
                staged = self._stage(state) if copy else state
            finally:
                self._staged.set()  # never leave the loop waiting
            step = int(state["step"])
            if fmt.claim(self.directory, step):
                try:
                    if self._superseded.is_set():
                        raise Superseded()
                    write_files(self.directory, staged, "periodic", self.rank, reuse=self._reusable(),
                                on_commit=self._committed.set, superseded=self._superseded)
                except BaseException:
                    fmt.release(self.directory, step)  # a survivor may still save this step
                    raise
                self._prune()
        except BaseException as exc:  # noqa: BLE001 - surfaced by the next save() or wait()
            self._failure = exc
        finally:
            self._in_flight = None
            self._committed.set()  # nor a survivor: this save is committed, or never will be

    def _stage(self, state: dict) -> dict:
        """`state` with its tensors copied to the CPU (exact resume: later steps cannot change the
        copy; and the file opens without the device that trained)."""
        live = tensors(state)
        if [(t.shape, t.dtype) for t in live] != [(b.shape, b.dtype) for b in self._buffers]:
            self._buffers = [torch.empty(t.shape, dtype=t.dtype, device="cpu") for t in live]
        for buffer, tensor in zip(self._buffers, live):
            buffer.copy_(tensor)
        return replace_tensors(state, iter(self._buffers))

    def _reusable(self, urgent: bool = False) -> Path | None:
        """The checkpoint the save about to be made will prune (the oldest, when `keep` are
        committed), to be written over. `urgent`: a survivor's save, which a restart waits for,
        takes the unfinished file of a writer that died mid-save if there is one (a rank killed
        during its periodic save: that save took the oldest checkpoint's file), else the oldest
        checkpoint while one other remains, leaving one fewer kept until the periodic saves catch
        up: a new file's page cache cost 2.4-5 s per GB here, a cached one 0.1 s."""
        if urgent and (abandoned := fmt.abandoned_temp(self.directory)) is not None:
            return abandoned
        committed = [p for p in fmt.list_files(self.directory) if fmt.sidecar_path(p).exists()]
        if self.keep < 2 or len(committed) < (2 if urgent else self.keep):
            return None
        return committed[0]

    def _prune(self) -> None:
        """Keep the newest `keep` committed checkpoints; anything older goes, finished or not."""
        committed = [p for p in fmt.list_files(self.directory) if fmt.sidecar_path(p).exists()]
        if len(committed) <= self.keep:
            return
        oldest_kept = fmt.NAME_RE.match(committed[-self.keep].name).group(1)
        for path in fmt.list_files(self.directory):
            step = fmt.NAME_RE.match(path.name).group(1)
            if int(step) < int(oldest_kept):
                fmt.sidecar_path(path).unlink(missing_ok=True)  # uncommit first
                path.unlink(missing_ok=True)
                fmt.release(self.directory, int(step))
