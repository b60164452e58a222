"""Files followed as the kernel changes them (inotify, through libc), in the event loop: how a
kubelet hears a run's log file grow while its shim (local/node/shim.py), not the kubelet, writes
it, and how the cockpit hears a `kfcockpit lesson` in another terminal replace the lesson's
progress file. One instance per kubelet or cockpit (the kernel allows a user few instances, many
watches). Linux only: elsewhere `FileWatcher()` raises OSError and the caller does without."""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct
from pathlib import Path
from typing import Callable

_libc = ctypes.CDLL(None, use_errno=True)
_IN_MODIFY, _IN_MOVED_TO, _IN_MASK_ADD = 0x00000002, 0x00000080, 0x20000000  # the last: one path, two watchers
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class FileWatcher:
    def __init__(self) -> None:
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        # per watch: (the name a directory's event must carry, or None for the file itself, callback)
        self._callbacks: dict[int, list[tuple[str | None, Callable[[], None]]]] = {}
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._readable)

    def watch(self, path: Path, changed: Callable[[], None]) -> tuple[int, tuple]:
        """Call `changed` whenever `path` is written; a handle for `unwatch`."""
        return self._add(path, _IN_MODIFY, None, changed)

    def watch_replaced(self, path: Path, changed: Callable[[], None]) -> tuple[int, tuple]:
        """Call `changed` whenever a file is renamed onto `path` (an atomic replace, as
        training.atomic.write_atomic makes): a watch on its directory, which must exist."""
        return self._add(path.parent, _IN_MOVED_TO, path.name, changed)

    def _add(self, path: Path, mask: int, name: str | None, changed: Callable[[], None]) -> tuple[int, tuple]:
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(path), mask | _IN_MASK_ADD)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        entry = (name, changed)
        self._callbacks.setdefault(wd, []).append(entry)
        return wd, entry

    def unwatch(self, handle: tuple[int, tuple]) -> None:
        wd, entry = handle
        callbacks = self._callbacks.get(wd) or []
        if entry in callbacks:
            callbacks.remove(entry)
        if not callbacks and self._callbacks.pop(wd, None) is not None and self.fd >= 0:
            _libc.inotify_rm_watch(self.fd, wd)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        woken: set[tuple[int, str]] = set()
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            woken.add((wd, os.fsdecode(name)))
        for wd, name in woken:
            for wanted, changed in list(self._callbacks.get(wd) or ()):
                if wanted is None or wanted == name:
                    changed()

    def close(self) -> None:
        if self.fd >= 0:
            self._loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
        self._callbacks.clear()
