"""Pod logs: the controller reads each pod's output pipe and appends it to the pod's log file.

A log file holds one line per printed line, `<epoch seconds> <text>`, so followers can merge
workers by time and resume from a byte offset. The controller reads the pipe when the kernel
says it is readable (no polling), stamps the chunk once, writes it with one write, and hands the
new lines to whoever follows the job.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Callable

from training.logfmt import step_and_loss

_READ_SIZE = 1 << 16
# At most one read per pod per interval: a fast worker prints hundreds of lines a second, and a
# wake-up per line would cost the controller a few % of a core that the workers need. Lines wait
# in the pipe meanwhile (at most this long), so nothing is lost and little is delayed.
READ_INTERVAL = 0.02


class PodLog:
    """The open log of one pod. `closed` resolves when its pipe reached end of file."""

    def __init__(self, path: Path, pod: str, rank: int,
                 on_lines: Callable[["PodLog", int, list[tuple[float, str]]], None],
                 router: Callable[[list[bytes]], None] | None = None):
        """`router`: what gets the lines read from the pipe, instead of this log (a Ray driver's
        output holds its workers' lines: the router hands each to its pod's log's `write`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.pod, self.rank = path, pod, rank
        self._file = open(path, "ab", buffering=0)
        self.size = self._file.tell()
        self._on_lines = on_lines
        self._deliver = router or self.write
        self._partial = b""
        self._fd: int | None = None
        self._rearm: asyncio.TimerHandle | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.last_step: tuple[int, float] | None = None

    def attach(self, read_fd: int) -> None:
        os.set_blocking(read_fd, False)
        self._fd = read_fd
        asyncio.get_running_loop().add_reader(read_fd, self._readable)

    def note(self, text: str) -> None:
        """A line from the platform itself (e.g. why a pod could not start)."""
        self.write([text.encode()])

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        if lines:
            self._deliver(lines)
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._fd)
        self._rearm = loop.call_later(READ_INTERVAL, self._watch_again)

    def _watch_again(self) -> None:
        self._rearm = None
        if self._fd is not None:
            asyncio.get_running_loop().add_reader(self._fd, self._readable)

    def write(self, raw_lines: list[bytes]) -> None:
        """Append whole lines (without their newline), stamped with the time now."""
        if self._file.closed:
            return  # the pod's log is closed: nothing more belongs to it
        now = time.time()
        texts = [line.decode(errors="replace").rstrip("\r") for line in raw_lines]
        stamp = f"{now:.6f} ".encode()
        self._file.write(b"".join(stamp + line.rstrip(b"\r") + b"\n" for line in raw_lines))
        self.size = self._file.tell()
        for text in reversed(texts):  # only the newest step matters for the pod's status
            found = step_and_loss(text)
            if found is not None:
                self.last_step = found
                break
        self._on_lines(self, self.size, [(now, t) for t in texts])

    def close(self) -> None:
        """Stop reading (end of file, or the pod is gone and something else holds the pipe)."""
        if self._rearm is not None:
            self._rearm.cancel()
            self._rearm = None
        if self._fd is not None:
            asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._partial:
            partial, self._partial = self._partial, b""
            self._deliver([partial])
        if not self._file.closed:
            self._file.close()
        if not self.closed.done():
            self.closed.set_result(None)


def read_lines(path: Path, start: int, end: int) -> list[tuple[float, str, int]]:
    """(time, text, offset after the line) of each whole line between two byte offsets."""
    if end <= start:
        return []
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    lines = []
    offset = start
    for raw in data.split(b"\n")[:-1]:  # the part after the last newline is not a whole line
        offset += len(raw) + 1
        stamp, _, text = raw.partition(b" ")
        try:
            lines.append((float(stamp), text.decode(errors="replace"), offset))
        except ValueError:
            lines.append((0.0, raw.decode(errors="replace"), offset))
    return lines
