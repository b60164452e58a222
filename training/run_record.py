"""The run's own record on its checkpoint volume: every line a worker prints, with its time.

ml-goodput-measurement has each worker write its step and job events to a durable log (Cloud
Logging) and computes goodput from that log, not from the pods: pods and their logs go when a
group restarts (JobSet recreates its Jobs), and the platform keeps no history of them. Here the
durable place every worker already shares is the checkpoint volume, so each rank appends the lines
it prints to `<run>/records/rank-<R>.log` as `<epoch seconds> <line>`, a file per rank (appends
from several machines to one file are not atomic on network volumes). `kfcockpit goodput` reads it
through a reader pod (backend/kube/volume_reader.py) and sees every group the run ever had.

No torch: the reader pod imports this module's format alone.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

DIRECTORY = "records"
_sink: int | None = None  # the open record of this process, if any


def start(run_dir: Path, rank: int) -> None:
    """From now on every line `write` is given goes to this rank's record too."""
    global _sink
    stop()
    directory = run_dir / DIRECTORY
    directory.mkdir(parents=True, exist_ok=True)
    _sink = os.open(directory / f"rank-{rank}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)


def stop() -> None:
    global _sink
    if _sink is not None:
        os.close(_sink)
        _sink = None


def write(line: str) -> None:
    """One line, timestamped, in one write (never torn across ranks' files: each has its own).
    A full volume must not stop training: the record is what goodput reads, not the run."""
    if _sink is not None:
        try:
            os.write(_sink, f"{time.time():.6f} {line}\n".encode())
        except OSError:
            pass


def read(run_dir: Path) -> Iterator[tuple[float, str]]:
    """(time, line) of every rank's record of the run, each file in order (merge them by time)."""
    for path in sorted((run_dir / DIRECTORY).glob("rank-*.log")):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for raw in text.splitlines():
            stamp, space, line = raw.partition(" ")
            try:
                at = float(stamp)
            except ValueError:
                continue
            if space:  # else a line cut short by a crash
                yield at, line
