"""The controller's own life cycle: its Unix socket (client.py: one JSON request line, one
reply line; only ping, up and shutdown) and the idle exit, armed when no job or bare pod runs
and nobody is connected, to the socket or watching through the API. A part of Controller
(controller.py), sharing its state.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Callable

from backend.local.barepods import BarePod
from backend.local.client import encode, read_message
from backend.local.layout import Layout
from backend.local.runner import Runner
from backend.local.warm import ZygotePool

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

log = logging.getLogger("kfcockpit.controller")

# A controller with no unfinished job and no client connected exits after this many seconds (0:
# never); the next command starts one again. Keeps forgotten state roots from holding memory.
IDLE_ENV = "KFCOCKPIT_CONTROLLER_IDLE_EXIT"
DEFAULT_IDLE_EXIT = 600.0


class Lifecycle:
    # The controller's state these methods use, made in Controller.__init__:
    layout: Layout
    api: ClusterApi
    runners: dict[str, Runner]
    bare_pods: dict[str, BarePod]
    zygotes: ZygotePool | None
    started: float
    idle_exit: float
    _clients: int
    _idle_timer: asyncio.TimerHandle | None
    _stopping: asyncio.Event | None

    prewarm: Callable[[], None]  # job_control.py

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One request line, one reply line: ping, up or shutdown (client.py). Jobs, pods, logs
        and everything else go through the Kubernetes API."""
        self._clients += 1
        self.check_idle()
        try:
            request = await read_message(reader)
            if request is None:
                return
            op = request.get("op")
            try:
                reply = self._lifecycle(op)
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

    def check_idle(self) -> None:
        """(Re)arm the idle exit when nothing runs and nobody is connected; disarm otherwise."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        busy = self._clients or any(not r.summary.phase.finished for r in self.runners.values()) \
            or any(p.running() for p in self.bare_pods.values()) \
            or (self.api.server is not None and self.api.server.open_streams > 0)
        if not busy and self.idle_exit > 0 and self._stopping is not None and not self._stopping.is_set():
            self._idle_timer = asyncio.get_running_loop().call_later(self.idle_exit, self._exit_idle)

    def _exit_idle(self) -> None:
        log.info("idle for %gs (no job running, no client): exiting; the next command starts a controller",
                 self.idle_exit)
        self._stopping.set()

    def _lifecycle(self, op: str | None) -> dict:
        if op == "ping":
            return {"pid": os.getpid(), "home": str(self.layout.home), "started": self.started,
                    "jobs": len(self.runners),
                    "pods_running": sum(p.phase.value == "Running" for r in self.runners.values() for p in r.pods()),
                    "warm": self.zygotes.status() if self.zygotes else []}
        if op == "up":
            self.prewarm()
            return self._lifecycle("ping")
        if op == "shutdown":
            asyncio.get_running_loop().call_soon(self._stopping.set)
            return {"ok": True, "pid": os.getpid()}
        return {"error": f"unknown operation {op!r}"}
