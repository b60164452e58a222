"""The embedded cluster's life cycle: start the controller when it is not running, ask it how it is,
warm it up, stop it. Everything else (jobs, pods, logs, volumes) goes through its Kubernetes API.

On the controller's Unix socket, one JSON request line and one JSON reply line: `ping` (its
status, the warm workers' and nodes' included), `up` (start the warm workers now), `shutdown`,
`node-fail` and `node-restore` (with `node`: what a machine does to one of its nodes).

Starting is race-free without polling: a client takes start.lock (flock), checks once more
that nobody answers, starts the controller and waits on a pipe for its "ready" line. Other
clients block on the same lock and then find it answering.

A controller that crashed or left when idle is started again on demand (embedded.py, for the
API's clients). One stopped on purpose (`kfcockpit cluster down`) stays stopped: `shutdown`
leaves a `stopped` marker, and only a user's explicit action (`cluster up`: `explicit=True`)
clears it and starts a controller; every other start gets Unavailable.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import select
import socket
import subprocess
import sys
import time
from typing import Any

from backend.cluster import ClusterError, Unavailable
from backend.local.layout import Layout, socket_address
from backend.project import PROJECT_ROOT

_START_TIMEOUT = 60.0
STOPPED_MESSAGE = "the local cluster was stopped; `kfcockpit cluster up` starts it"
_LOG_KEEP = 10 * 1024 * 1024  # controller.log is rotated past this size when a controller starts


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None when the peer closed the connection (or died mid-line)."""
    line = await reader.readline()
    return json.loads(line) if line.endswith(b"\n") else None


class ControllerClient:
    def __init__(self, layout: Layout):
        self.layout = layout

    # ------------------------------------------------------------------ connecting

    async def _connect_once(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        address, dir_fd = socket_address(self.layout.socket)
        try:
            return await asyncio.open_unix_connection(address)
        finally:
            if dir_fd is not None:
                os.close(dir_fd)

    async def connect(self, start: bool = True, explicit: bool = False
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the controller. `start`: start one if none answers, unless the cluster
        was stopped on purpose; `explicit` (a user's action that needs the cluster) starts it anyway."""
        if explicit:
            self.layout.stopped.unlink(missing_ok=True)
        try:
            return await self._connect_once()
        except (FileNotFoundError, ConnectionRefusedError):
            if not start:
                raise Unavailable("the local cluster is not running (start it: kfcockpit cluster up)") from None
        await asyncio.to_thread(self.start_controller)
        try:
            return await self._connect_once()
        except OSError as exc:
            raise Unavailable(f"the local cluster controller started but does not answer ({exc}); "
                              f"see {self.layout.controller_log}") from None

    async def call(self, op: str, start: bool = True, explicit: bool = False, **args: Any) -> dict:
        reader, writer = await self.connect(start, explicit)
        try:
            writer.write(encode({"op": op, **args}))
            await writer.drain()
            reply = await read_message(reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            reply = None
        finally:
            writer.close()
        if reply is None:
            raise Unavailable(f"the local cluster controller went away during {op}; see {self.layout.controller_log}")
        if "error" in reply:
            raise ClusterError(reply["error"])
        return reply

    async def ping(self) -> dict | None:
        """The controller's status, or None when none is running (never starts one)."""
        try:
            return await self.call("ping", start=False)
        except Unavailable:
            return None

    # ------------------------------------------------------------------ starting and stopping

    def answers(self) -> bool:
        address, dir_fd = socket_address(self.layout.socket)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(address)
            return True
        except OSError:
            return False
        finally:
            if dir_fd is not None:
                os.close(dir_fd)

    def start_controller(self) -> None:
        """Start the controller unless one answers (blocking; call it from a thread)."""
        self.layout.create()
        with open(self.layout.start_lock, "a+") as start_lock:
            fcntl.flock(start_lock, fcntl.LOCK_EX)
            if self.answers():
                return
            if self.layout.stopped.exists():  # checked under the lock `stop_for_good` takes
                raise Unavailable(STOPPED_MESSAGE)
            outcome = self._spawn_controller()
            if outcome == "busy":  # a controller still holds the lock while it shuts down
                self._wait_for_lock_holder()
                outcome = self._spawn_controller()
            if outcome != "ready":
                raise Unavailable(f"the local cluster controller did not start: {self._log_tail()} "
                                  f"(see {self.layout.controller_log})")

    def _spawn_controller(self) -> str:
        log_path = self.layout.controller_log
        if log_path.exists() and log_path.stat().st_size > _LOG_KEEP:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))  # one old log kept
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
        try:
            with open(self.layout.controller_log, "ab") as log:
                launcher = subprocess.Popen(
                    [sys.executable, "-m", "backend.local.controller", "--home", str(self.layout.home),
                     "--ready-fd", str(write_fd)],
                    pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True, cwd=PROJECT_ROOT, env=env)
        finally:
            os.close(write_fd)
        try:
            launcher.wait()  # it forks the controller off and exits at once
            data = b""
            deadline = time.monotonic() + _START_TIMEOUT
            while time.monotonic() < deadline:
                ready, _, _ = select.select([read_fd], [], [], deadline - time.monotonic())
                if not ready:
                    break
                chunk = os.read(read_fd, 64)
                if not chunk:
                    break
                data += chunk
                if data.endswith(b"\n"):
                    break
        finally:
            os.close(read_fd)
        return data.decode().strip() or "failed"

    def _wait_for_lock_holder(self) -> None:
        pid = self.controller_pid()
        if pid is None:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return
        try:
            select.select([fd], [], [], _START_TIMEOUT)
        finally:
            os.close(fd)

    def controller_pid(self) -> int | None:
        try:
            return int(self.layout.lock.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _log_tail(self) -> str:
        try:
            text = self.layout.controller_log.read_text(errors="replace")
            lines = [line for line in text.splitlines() if line.strip()]
        except OSError:
            return "no controller log"
        return lines[-1][-300:] if lines else "the controller printed nothing"

    def _mark_stopped(self) -> None:
        """From now on nothing starts a controller by itself. Under start.lock, so a client
        that is starting one has finished (and its controller is stopped below) or sees this."""
        self.layout.create()
        with open(self.layout.start_lock, "a+") as start_lock:
            fcntl.flock(start_lock, fcntl.LOCK_EX)
            self.layout.stopped.touch()

    async def shutdown(self, timeout: float = 60.0) -> int | None:
        """Stop the controller (and every pod) for good: it stays stopped until a user's action
        starts it (see the module doc). Returns its pid once it has exited, None if none ran."""
        await asyncio.to_thread(self._mark_stopped)
        try:
            reply = await self.call("shutdown", start=False)
        except Unavailable:
            return None
        pid = reply["pid"]
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return pid  # already gone
        loop = asyncio.get_running_loop()
        gone = loop.create_future()
        loop.add_reader(fd, lambda: gone.done() or gone.set_result(None))
        try:
            await asyncio.wait_for(gone, timeout)
        except asyncio.TimeoutError:
            raise Unavailable(f"the controller (pid {pid}) did not stop within {timeout:g}s") from None
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        return pid
