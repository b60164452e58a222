"""Checkpoints as files in a directory on the shared volume (the torchrun launcher's store).

Rank 0 writes; every rank reads. A save copies the state (a fraction of a millisecond) and hands
it to a writer thread, so training goes on while the copy is serialised: torch.save to memory,
header + payload to a temp file, fsync, atomic rename, fsync the directory, prune to the newest
`keep`. One save is in flight at a time. Resume picks the newest file whose checksum holds,
reporting each file it skips in one line.
"""

from __future__ import annotations

import copy
import io
import os
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

from training import checkpoint_format as fmt
from training.loop import emit

# Fault injection for tests of the crash window: "crash_before_rename@15" makes the process die
# after the temp file of step 15 is written and before it is renamed into place.
FAULT_ENV = "KFCOCKPIT_FAULT"


def encode_state(state: dict) -> bytes:
    """A loop state as checkpoint file bytes: the header the browser reads, then torch.save."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    history = state["loss_history"]
    header = {
        "format": 1,
        "step": int(state["step"]),
        "world_size": state["world_size"],
        "loss": history[-1] if history else None,
        "created": time.time(),
    }
    return fmt.encode(header, buffer.getvalue())


def newest_valid(directory: Path, rank: int) -> tuple[str, bytes] | None:
    """(file name, payload) of the newest checkpoint whose checksum holds; one line per file skipped."""
    for path in reversed(fmt.list_files(directory)):
        try:
            _, payload = fmt.read_payload(path)
            return path.name, payload
        except (fmt.InvalidCheckpoint, OSError) as exc:
            emit(event="checkpoint_skipped", file=path.name, reason=str(exc), rank=rank)
    return None


def load_state(payload: bytes) -> dict:
    return torch.load(io.BytesIO(payload), weights_only=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileCheckpoints:
    def __init__(self, directory: Path, keep: int, rank: int):
        self.directory = directory
        self.keep = keep
        self.rank = rank
        self._writer: threading.Thread | None = None
        self._failure: BaseException | None = None
        if rank == 0:
            directory.mkdir(parents=True, exist_ok=True)
            # Leftovers of a writer that died mid-save; no writer runs while a group starts.
            for stale in directory.glob(".ckpt-step-*.tmp-*"):
                stale.unlink(missing_ok=True)

    def load_latest(self) -> dict | None:
        # Rank 0 chooses (and keeps what it verified); the others read the file it names.
        found = newest_valid(self.directory, self.rank) if self.rank == 0 else None
        chosen = [found[0] if found else ""]
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.broadcast_object_list(chosen, src=0)
        if not chosen[0]:
            return None
        payload = found[1] if found else fmt.read_payload(self.directory / chosen[0])[1]
        return load_state(payload)

    def save(self, state: dict) -> None:
        if self.rank != 0:
            return
        self.wait()
        # Copied now, so later steps cannot change what this checkpoint holds (exact resume).
        frozen = copy.deepcopy(state)
        self._writer = threading.Thread(target=self._write_guarded, args=(frozen,),
                                        name="checkpoint-writer", daemon=True)
        self._writer.start()

    def wait(self) -> None:
        """Block until the save in flight is on disk; re-raise its error, if any."""
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def _write_guarded(self, state: dict) -> None:
        try:
            self._write(state)
        except BaseException as exc:  # surfaced by the next save() or wait()
            self._failure = exc

    def _write(self, state: dict) -> None:
        started = time.perf_counter()
        step = int(state["step"])
        data = encode_state(state)
        final = self.directory / fmt.file_name(step)
        tmp = self.directory / fmt.temp_name(step, os.getpid())
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if os.environ.get(FAULT_ENV) == f"crash_before_rename@{step}":
            os._exit(137)
        os.replace(tmp, final)
        _fsync_dir(self.directory)
        self._prune()
        emit(event="checkpoint_saved", step=step, file=final.name, bytes=len(data),
             seconds=time.perf_counter() - started, rank=self.rank)

    def _prune(self) -> None:
        for old in fmt.list_files(self.directory)[: -self.keep]:
            old.unlink(missing_ok=True)

