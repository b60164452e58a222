"""The controller process's own life: its Unix socket (client.py: one JSON request line, one
reply line: ping, up, shutdown, and what a machine does to its nodes: node-fail, node-restore)
and the idle exit, armed when no pod runs and nobody is connected, to the socket or watching
through the API. Built from the functions the composition root gives it (controller.py); it knows
nothing else of the cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from typing import Any, Awaitable, Callable

from backend.errors import ClusterError
from backend.local.client import encode, read_message
from backend.local.layout import Layout, socket_address

log = logging.getLogger("kfcockpit.controller")

# A controller with no unfinished pod and no client connected exits after this many seconds (0:
# never); the next command starts one again. Keeps forgotten state roots from holding memory.
IDLE_ENV = "KFCOCKPIT_CONTROLLER_IDLE_EXIT"
DEFAULT_IDLE_EXIT = 600.0


class Lifecycle:
    def __init__(self, layout: Layout, busy: Callable[[], bool], status: Callable[[], dict],
                 warm: Callable[[], None], stop: Callable[[], None],
                 ops: dict[str, Callable[[dict[str, Any]], dict | Awaitable[dict]]] | None = None):
        """`busy()`: something runs (a pod, a watch); `status()`: what ping tells; `warm()`: start
        the warm workers now; `stop()`: end the process; `ops`: more operations by name, each
        given the request (a ClusterError it raises is the one-line reply)."""
        self.layout, self.busy, self.status, self.warm, self.stop = layout, busy, status, warm, stop
        self.ops = ops or {}
        self.idle_exit = float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_EXIT))
        self._clients = 0
        self._timer: asyncio.TimerHandle | None = None
        self._stopping = False

    async def serve(self) -> asyncio.AbstractServer:
        address, dir_fd = socket_address(self.layout.socket)
        self.layout.socket.unlink(missing_ok=True)  # a dead controller's; we hold the lock
        try:
            return await asyncio.start_unix_server(self._handle, path=address)
        finally:
            if dir_fd is not None:
                os.close(dir_fd)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One request line, one reply line: ping, up or shutdown. Jobs, pods, logs and everything
        else go through the Kubernetes API."""
        self._clients += 1
        self.check_idle()
        try:
            request = await read_message(reader)
            if request is None:
                return
            op = request.get("op")
            try:
                reply = self._answer(op) if op not in self.ops else self.ops[op](request)
                if inspect.isawaitable(reply):
                    reply = await reply
            except ClusterError as exc:  # the user's to fix: one line
                reply = {"error": str(exc)}
            except Exception as exc:  # noqa: BLE001 - a bug, reported in one line, logged in full
                log.exception("request %s failed", op)
                reply = {"error": f"controller error in {op}: {type(exc).__name__}: {exc}"}
            writer.write(encode(reply))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()
            self._clients -= 1
            self.check_idle()

    def _answer(self, op: str | None) -> dict:
        if op == "ping":
            return self.status()
        if op == "up":
            self.warm()
            return self.status()
        if op == "shutdown":
            self._stopping = True
            asyncio.get_running_loop().call_soon(self.stop)
            return {"ok": True, "pid": os.getpid()}
        return {"error": f"unknown operation {op!r}"}

    def check_idle(self) -> None:
        """(Re)arm the idle exit when nothing runs and nobody is connected; disarm otherwise."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._clients or self.busy() or self.idle_exit <= 0 or self._stopping:
            return
        self._timer = asyncio.get_running_loop().call_later(self.idle_exit, self._exit_idle)

    def _exit_idle(self) -> None:
        log.info("idle for %gs (no pod running, no client): exiting; the next command starts a controller",
                 self.idle_exit)
        self._stopping = True
        self.stop()
