"""Files followed as the kernel changes them (inotify, through libc), in the event loop: how a
kubelet hears a run's log file grow while its shim (shim.py), not the kubelet, writes it. One
inotify instance per kubelet (the kernel allows a user few instances, many watches)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct
from pathlib import Path
from typing import Callable

_libc = ctypes.CDLL(None, use_errno=True)
_IN_MODIFY = 0x00000002
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class FileWatcher:
    def __init__(self) -> None:
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._callbacks: dict[int, list[Callable[[], None]]] = {}
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._readable)

    def watch(self, path: Path, changed: Callable[[], None]) -> tuple[int, Callable[[], None]]:
        """Call `changed` whenever `path` is written; a handle for `unwatch`."""
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(path), _IN_MODIFY)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        self._callbacks.setdefault(wd, []).append(changed)
        return wd, changed

    def unwatch(self, handle: tuple[int, Callable[[], None]]) -> None:
        wd, changed = handle
        callbacks = self._callbacks.get(wd) or []
        if changed in callbacks:
            callbacks.remove(changed)
        if not callbacks and self._callbacks.pop(wd, None) is not None and self.fd >= 0:
            _libc.inotify_rm_watch(self.fd, wd)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        woken = set()
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
            offset += _EVENT.size + length
            woken.add(wd)
        for wd in woken:
            for changed in list(self._callbacks.get(wd) or ()):
                changed()

    def close(self) -> None:
        if self.fd >= 0:
            self._loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
        self._callbacks.clear()
