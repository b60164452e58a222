"""The embedded cluster's controller: API server, scheduler and kubelet of one machine in one
asyncio process. Exactly one runs per state root (an fcntl lock); clients start it on demand.

    python -m backend.local.controller --home DIR --ready-fd N   (started by client.py)

It serves the Kubernetes API (apiserver/, tied to it by api.py) and, on a Unix socket, only its
own life cycle (client.py: ping, up, shutdown); keeps the API's objects and observed status as
JSON under the state root, and reconciles each TrainJob and RayJob (jobs.py, rayjobs.py). It is
single-threaded on purpose: pods are forked from it, and fork is only safe without other threads.

This module is the process: start, lock, serve, stop. What the controller does is in its parts,
one state shared: job_control.py (runtimes and jobs → runners, recovery), storage.py (volumes and
snapshots), kubelet.py (child processes, pods by name), lifecycle.py (the socket, the idle exit).

When a controller dies its pods die with it (PR_SET_PDEATHSIG). The next one kills any process
still marked with this state root, then recovers every unfinished job by the failure policy:
the lost group counts as a failure, so the job is recreated from its checkpoints (restart
attempt + 1) or, with its restarts used up, Failed. No worker is ever left behind unsupervised.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

from backend.local import objects
from backend.local.api import ClusterApi
from backend.local.barepods import BarePod
from backend.local.events import EventLog
from backend.local.job_control import JobControl
from backend.local.kubelet import Kubelet
from backend.local.layout import Layout, socket_address
from backend.local.lifecycle import DEFAULT_IDLE_EXIT, IDLE_ENV, Lifecycle
from backend.local.runner import Runner
from backend.local.scheduler import Scheduler
from backend.local.storage import Storage
from backend.local.warm import ZygotePool
from backend.models import PersistentVolumeClaim, TrainingRuntime, VolumeSnapshot
from backend.processes import become_subreaper

log = logging.getLogger("kfcockpit.controller")


class Controller(JobControl, Storage, Kubelet, Lifecycle):
    """One state root's controller; its parts' methods share the state made here."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.events = EventLog()
        self.runners: dict[str, Runner] = {}  # TrainJobs and RayJobs by name (one namespace)
        self.runtimes: dict[tuple[str, str], TrainingRuntime] = {}
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.snapshot_specs: dict[str, VolumeSnapshot] = {}
        self.started = time.time()
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._stopping: asyncio.Event | None = None
        self.zygotes: ZygotePool | None = None
        self._clients = 0
        self._idle_timer: asyncio.TimerHandle | None = None
        self.idle_exit = float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_EXIT))
        capacity = node_capacity(layout)
        self.scheduler = Scheduler(capacity["cpu"], capacity["memory"], objects.MAX_PODS, self._unschedulable)
        self.api = ClusterApi(self, capacity)
        self.bare_pods: dict[str, BarePod] = {}  # "<namespace>.<name>" -> pods created through the API
        self._volume_waiters: list[asyncio.Future] = []  # pods waiting for a claim's volume
        self.events.listeners.append(self._mirror)

    async def run(self, ready_fd: int | None) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        loop.add_signal_handler(signal.SIGCHLD, self._reap)
        loop.add_signal_handler(signal.SIGTERM, self._stopping.set)
        loop.add_signal_handler(signal.SIGINT, self._stopping.set)
        become_subreaper()
        self._sweep_leftovers()
        self._load()
        address, dir_fd = socket_address(self.layout.socket)
        self.layout.socket.unlink(missing_ok=True)  # a dead controller's; we hold the lock
        try:
            server = await asyncio.start_unix_server(self._handle, path=address)
        finally:
            if dir_fd is not None:
                os.close(dir_fd)
        log.info("controller %s serving %s", os.getpid(), self.layout.socket)
        self.api.mirror.mirror_all()
        await self.api.serve()
        self.zygotes = ZygotePool(self.layout.root, sys.stderr.fileno(), self.watch_exit, self._worker_exited)
        for runner in self.runners.values():
            if not runner.summary.phase.finished:
                runner.start()
        self.check_idle()
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
        await self._stopping.wait()
        log.info("controller %s stopping", os.getpid())
        await asyncio.gather(*(r.stop() for r in self.runners.values()), return_exceptions=True)
        for runner in self.runners.values():
            runner.persist()
        self.zygotes.stop()
        await self.api.close()
        server.close()
        self.layout.socket.unlink(missing_ok=True)


def node_capacity(layout: Layout) -> dict[str, float]:
    """The node's allocatable CPU (cores) and memory (bytes): the machine's, unless `cluster up
    --cpus/--memory` set them (node.json)."""
    capacity = {"cpu": float(os.cpu_count() or 1), "memory": float(objects.meminfo().get("MemTotal", 0))}
    try:
        chosen = json.loads(layout.node_file.read_text())
        capacity.update({k: float(v) for k, v in chosen.items() if k in capacity and v})
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return capacity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="backend.local.controller")
    parser.add_argument("--home", required=True, type=Path)
    parser.add_argument("--ready-fd", type=int)
    parser.add_argument("--foreground", action="store_true", help="do not detach (for debugging)")
    args = parser.parse_args(argv)
    if not args.foreground and os.fork() > 0:
        os._exit(0)  # the starter reaps this parent at once; the controller lives on, detached
    layout = Layout(args.home)
    layout.create()
    lock_fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if args.ready_fd is not None:
            os.write(args.ready_fd, b"busy\n")
        return 0
    os.ftruncate(lock_fd, 0)
    os.write(lock_fd, f"{os.getpid()}\n".encode())
    if args.ready_fd is not None:
        os.set_inheritable(args.ready_fd, False)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format=f"%(asctime)s controller[{os.getpid()}] %(levelname)s %(message)s")
    asyncio.run(Controller(layout).run(args.ready_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main())

