"""A pod's logs on its node: written from its container's output pipe, read by pods/log.

A run's shim (shim.py) writes its log file and outlives the kubelet; the kubelet follows the file
as the kernel says it grows (`FollowedLog`, inotify). A Ray driver's output, whose lines the
kubelet hands to its workers' pods, is read by the kubelet itself (`PodLog`).

Each container run has its own file, `<logs>/<namespace>/<pod>_<uid>/<container>/<restart>.log`
(the kubelet's /var/log/pods layout), one line per printed line, `<epoch seconds> <text>`, so
readers merge workers by time and resume from a byte offset, and `--previous` reads the run
before. The node reads the pipe when the kernel says it is readable (no polling), at most once
per READ_INTERVAL: a fast worker prints hundreds of lines a second, and a wake-up per line would
cost the node CPU the workers need; lines wait in the pipe meanwhile, nothing is lost. A chunk is
stamped once and written with one write; followers are woken by it. A write the disk refuses
(full) drops its lines, the container running on; the next write that holds first says how many
were lost and why, as a line of the log (shim.LogFile, which the shim and the node both write
with).

`follow` is what `kubectl logs` gets (container, previous, since, tail, limitBytes, timestamps,
follow): the file from the start, and with follow what is appended, until the container's run
has ended and its output is drained.
"""

from __future__ import annotations

import asyncio
import calendar
import logging
import os
import time
from pathlib import Path
from typing import AsyncIterator, Callable

from backend.inotify import FileWatcher
from backend.local.node.shim import READ_INTERVAL, LogFile
from backend.local.registry.status import bad_request
from backend.local.registry.filenames import file_name

log = logging.getLogger("kfcockpit.kubelet")

_READ_SIZE = 1 << 16
_LAST_LINES = 5  # kept for a termination message (FallbackToLogsOnError)


class PodLog:
    """The open log of one container run. `closed` resolves when its pipe reached end of file."""

    def __init__(self, path: Path, router: Callable[[list[bytes]], None] | None = None):
        """`router`: what gets the lines read from the pipe, instead of this log (a Ray driver's
        output holds its workers' lines: the router hands each to its pod's log's `write`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = LogFile(path, log.warning)
        self._deliver = router or self.write
        self._partial = b""
        self._fd: int | None = None
        self._rearm: asyncio.TimerHandle | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.changed = asyncio.Event()  # set by every write; followers clear it
        self.last_lines: list[str] = []  # the newest few, for a termination message

    def attach(self, read_fd: int) -> None:
        os.set_blocking(read_fd, False)
        self._fd = read_fd
        asyncio.get_running_loop().add_reader(read_fd, self._readable)

    def note(self, text: str) -> None:
        """A line from the node itself (e.g. why a container could not start)."""
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
        if self._file.file.closed:
            return  # the run's log is closed: nothing more belongs to it
        if not self._file.write(raw_lines):
            return
        self.last_lines = (self.last_lines + [line.decode(errors="replace").rstrip("\r")
                                              for line in raw_lines[-_LAST_LINES:]])[-_LAST_LINES:]
        self.changed.set()

    def close(self) -> None:
        """Stop reading (end of file, or the run is over and something else holds the pipe)."""
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
        if not self._file.file.closed:
            self._file.close()
        self.changed.set()
        if not self.closed.done():
            self.closed.set_result(None)


class FollowedLog:
    """The log file of a container run that its shim writes, followed: `changed` is set whenever
    it grows (inotify), `closed` resolves once the run has ended (`close`, by the container)."""

    def __init__(self, path: Path, files: FileWatcher):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()  # watched before its shim writes the first line
        self.path, self._files = path, files
        self.changed = asyncio.Event()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.last_lines: list[str] = []
        self._watch = files.watch(path, self.changed.set)

    def note(self, text: str) -> None:
        """A line from the node itself (why a container could not start: no shim writes then)."""
        writer = LogFile(self.path, log.warning)
        writer.write([text.encode()])
        writer.close()
        self.changed.set()

    def close(self) -> None:
        """The run has ended and its shim wrote its last line."""
        if self.closed.done():
            return
        self._files.unwatch(self._watch)
        size = self.path.stat().st_size if self.path.exists() else 0
        start = max(0, size - _READ_SIZE)
        tail = read_lines(self.path, start, size)[1 if start else 0:]  # past a cut first line
        self.last_lines = [text for _t, text, _e in tail][-_LAST_LINES:]
        self.changed.set()
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


def pod_directory(pod: str, uid: str) -> str:
    """The name of a pod's log directory: its name and uid, a long name (pod names go up to 253
    characters) shortened with a hash so that the directory's name fits a file name."""
    return f"{file_name(pod, 200 - len(uid))}_{uid}"


def log_path(root: Path, namespace: str, pod: str, uid: str, container: str, restart: int) -> Path:
    return root / namespace / pod_directory(pod, uid) / container / f"{restart}.log"


async def follow(path: Path, live: PodLog | FollowedLog | None, options: dict[str, str]) -> AsyncIterator[bytes]:
    """The bytes of one container run's log as `kubectl logs` asks for them; with follow, until
    `live` (the run's open log, None when it has ended) is closed and read to its end."""
    timestamps, keep_following = _flag(options.get("timestamps")), _flag(options.get("follow"))
    since = _since(options)
    try:
        tail = int(options["tailLines"]) if "tailLines" in options else None
        limit = int(options["limitBytes"]) if "limitBytes" in options else None
    except ValueError:
        raise bad_request("tailLines and limitBytes must be integers") from None
    size = path.stat().st_size if path.exists() else 0
    lines = [(t, text) for t, text, _end in read_lines(path, 0, size) if since is None or t >= since]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    chunk = _format(lines, timestamps)
    if limit is not None:
        chunk = chunk[:limit]
    sent = len(chunk)
    yield chunk
    offset = size
    while keep_following and live is not None and (limit is None or sent < limit):
        ended = live.closed.done()
        live.changed.clear()
        size = path.stat().st_size if path.exists() else offset
        if size > offset:
            data = _format([(t, x) for t, x, _e in read_lines(path, offset, size)], timestamps)
            offset = size
            if limit is not None:
                data = data[:max(0, limit - sent)]
            sent += len(data)
            if data:
                yield data
        if ended:
            return
        await live.changed.wait()


def _flag(value: str | None) -> bool:
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _since(options: dict[str, str]) -> float | None:
    if "sinceSeconds" in options:
        try:
            return time.time() - int(options["sinceSeconds"])
        except ValueError:
            raise bad_request("sinceSeconds must be an integer") from None
    if "sinceTime" in options:
        try:
            return calendar.timegm(time.strptime(options["sinceTime"][:19], "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            raise bad_request("sinceTime must be an RFC 3339 time") from None
    return None


def _format(lines: list[tuple[float, str]], timestamps: bool) -> bytes:
    if timestamps:
        return "".join(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e9):09d}Z {text}\n"
                       for t, text in lines).encode()
    return "".join(f"{text}\n" for _t, text in lines).encode()
