"""The controller's side of warm workers: start zygotes (zygote.py), ask them for workers.

One zygote per distinct set of import-time variables (`podspec.zygote_key`); in practice one.
A zygote that cannot serve (unfit, or dies) makes its pods fall back to the exact torchrun path;
the failure policy is the same either way, so recovery semantics do not depend on the path. The
workers it forked live on without it, below their shims (shim.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
from typing import Callable

from backend.local.node import podspec
from backend.processes import SpawnError, kill_group, spawn

log = logging.getLogger("kfcockpit.controller")

_MAX_ZYGOTES = 2


class Zygote:
    def __init__(self, key: tuple[tuple[str, str], ...], cluster_id: str, log_fd: int,
                 watch_exit: Callable[[int], asyncio.Future]):
        self.key = key
        self._loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[bool] = self._loop.create_future()
        self.problem = ""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: os.environ[k] for k in ("HOME", "USER", "LANG", "TMPDIR") if k in os.environ}
        env.update(dict(key))
        env["PATH"] = os.pathsep.join([podspec.VENV_BIN, os.environ.get("PATH", "/usr/bin:/bin")])
        env.setdefault("PYTHONPATH", podspec.PROJECT_ROOT)
        env[podspec.ENV_CLUSTER] = cluster_id
        try:
            self.pid = spawn([sys.executable, "-m", "backend.local.node.zygote", "--fd", str(child.fileno())],
                             env, podspec.PROJECT_ROOT, log_fd, keep_fds=(child.fileno(),))
        finally:
            child.close()
        self._sock = parent
        parent.setblocking(False)
        self._loop.add_reader(parent.fileno(), self._readable)
        watch_exit(self.pid).add_done_callback(lambda _: self._lost("the zygote exited"))

    @property
    def usable(self) -> bool:
        return self.ready.done() and self.ready.result() and not self.problem

    async def spawn(self, request: dict, report_fd: int) -> None:
        """Have a shim forked for a run (`request`: container.Container's), reporting on
        `report_fd`. SpawnError if the zygote cannot take it."""
        if not await self.ready or self.problem:
            raise SpawnError(self.problem or "warm workers unavailable")
        try:
            socket.send_fds(self._sock, [json.dumps({"op": "spawn", **request}).encode()], [report_fd])
        except OSError as exc:
            self._lost(f"cannot reach the zygote: {exc}")
            raise SpawnError(self.problem) from None

    def _readable(self) -> None:
        try:
            data = self._sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._lost("the zygote closed its socket")
            return
        message = json.loads(data)
        op = message.get("op")
        if op == "ready":
            log.info("warm workers ready (zygote pid %s, imports took %ss)", self.pid, message["seconds"])
            self.ready.set_result(True)
        elif op == "unfit":
            self.problem = message["error"]
            log.warning("warm workers unavailable: %s", self.problem)
            self.ready.set_result(False)

    def _lost(self, why: str) -> None:
        if self.problem:
            return
        self.problem = why
        log.warning("zygote %s: %s", self.pid, why)
        try:
            self._loop.remove_reader(self._sock.fileno())
        except (ValueError, OSError):
            pass
        self._sock.close()
        if not self.ready.done():
            self.ready.set_result(False)

    def stop(self) -> None:
        """The zygote exits (the workers it forked live on below their shims)."""
        kill_group(self.pid)
        self._lost("stopped")


class ZygotePool:
    def __init__(self, cluster_id: str, log_fd: int, watch_exit):
        self._args = (cluster_id, log_fd, watch_exit)
        self._zygotes: dict[tuple, Zygote] = {}

    def get(self, key: tuple[tuple[str, str], ...]) -> Zygote:
        zygote = self._zygotes.get(key)
        if zygote is None or (zygote.problem and zygote.ready.done() and zygote.ready.result()):
            # None yet, or one that served and then died: start afresh. An unfit one stays unfit.
            if len(self._zygotes) >= _MAX_ZYGOTES:
                self._evict()
            zygote = self._zygotes[key] = Zygote(key, *self._args)
        return zygote

    def _evict(self) -> None:
        key = next(iter(self._zygotes))  # the oldest: its workers live on without it
        self._zygotes.pop(key).stop()

    def status(self) -> list[dict]:
        return [{"pid": z.pid, "ready": z.usable, "problem": z.problem}
                for z in self._zygotes.values()]

    async def settled(self) -> list[dict]:
        """`status()` once every zygote started so far is ready or found unfit."""
        await asyncio.gather(*(asyncio.shield(z.ready) for z in self._zygotes.values()))
        return self.status()

    def stop(self) -> None:
        for zygote in self._zygotes.values():
            zygote.stop()
        self._zygotes.clear()
