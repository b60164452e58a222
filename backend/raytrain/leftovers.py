"""Finding every process a Ray run started, so none outlives it.

The launcher puts KFCOCKPIT_RAY_RUN=<run name> in the driver's environment. Ray's own processes
(gcs_server, raylet, the agents, the log monitor) and its workers inherit it, even after they are
re-parented, so /proc tells exactly which processes belong to a run and nothing else is touched.
Waiting for them to exit uses pidfds: an event per process, no polling.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import time

MARKER = "KFCOCKPIT_RAY_RUN"


def run_processes(run: str) -> list[int]:
    """Pids of live (not zombie) processes carrying this run's marker."""
    needle = f"{MARKER}={run}".encode()
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:  # exited meanwhile, or another user's
            continue
        if needle in environ and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Block until these processes exit or `timeout` passes; returns those still alive."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    try:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        remaining = set(fds)
        end = time.monotonic() + timeout
        while remaining:
            left = end - time.monotonic()
            if left <= 0:
                break
            for fd, _ in poller.poll(left * 1000):
                remaining.discard(fd)
                poller.unregister(fd)
        return [fds[fd] for fd in remaining]
    finally:
        for fd in fds:
            os.close(fd)


def reap(run: str, grace: float = 5.0) -> list[int]:
    """Give a finished run's processes `grace` seconds to exit, then SIGKILL the rest.

    Returns the pids that had to be killed (empty when Ray shut itself down cleanly)."""
    stragglers = _wait_gone(run_processes(run), grace)
    for pid in stragglers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _wait_gone(stragglers, grace)
    return stragglers


async def reap_async(run: str, grace: float = 5.0) -> list[int]:
    return await asyncio.to_thread(reap, run, grace)
