"""One run of a pod's container: the node's container runtime, with processes for containers.

A run is a process in a session of its own, exec'd (the command as is) or forked by a zygote
that has torch imported (warm.py), its output on a pipe to its log file (logs.PodLog), its
processes in the pod's pids cgroup, and it dies with the node (PR_SET_PDEATHSIG). Every process
of it carries the node's and the pod's markers in its environment (ENV_CLUSTER, ENV_POD), so
the end of a run finds and kills what it started in sessions of its own (torchrun's workers, a
Ray driver's processes). A run has ended when its process exited, its marked descendants are
gone and its output is drained, so the pod's final status comes after its last log line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import Awaitable, Callable

from backend.local.node import confine
from backend.local.node.logs import PodLog
from backend.local.node.podspec import ENV_CLUSTER, ENV_POD, LaunchSpec
from backend.processes import SpawnError, kill_group, marked_processes, spawn, sweep, wait_gone_async

log = logging.getLogger("kfcockpit.kubelet")

_LOG_DRAIN_SECONDS = 5.0  # after exit, how long a pipe may stay open (held by a straggler)
_SWEPT_GONE_SECONDS = 10.0  # how long SIGKILLed descendants may take to be gone
START_ERROR_STATUS = 127 << 8  # the wait status of a command that could not start

# (pod key, spec, log pipe's write end, cgroup.procs files) -> the forked worker's pid
Fork = Callable[[str, LaunchSpec, int, "str | None"], Awaitable[int]]


class Container:
    def __init__(self, key: str, cluster_id: str, log: PodLog):
        self.key, self.cluster_id, self.log = key, cluster_id, log
        self.pid: int | None = None
        self.exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.started = time.time()
        self.warm = False
        self.start_error = ""
        self.note = ""  # why it failed, when the node learned it from its output (a Ray driver's)

    async def start(self, spec: LaunchSpec, exit_of: Callable[[int], asyncio.Future],
                    fork: Fork | None = None, cgroups: tuple[str, ...] = ()) -> None:
        """Start the process (forked by `fork` when the spec is warm and one is given, else
        exec'd). One that cannot start has ended at once with exit code 127."""
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        self.log.attach(read_fd)
        try:
            if fork is not None and spec.warm is not None:
                self.warm = True
                self.pid = await fork(self.key, spec, write_fd, cgroups)
            else:
                # torchrun forwards SIGTERM to its workers, a Ray driver shuts its Ray down; a
                # plain program just ends.
                plan = spec.confine
                self.pid = spawn(spec.argv, spec.env, spec.cwd, write_fd, death_signal=signal.SIGTERM,
                                 cgroups=cgroups, before_exec=(lambda: confine.enter(plan)) if plan else None)
                exit_of(self.pid).add_done_callback(lambda f: self.exited(f.result()))
        except (SpawnError, OSError) as exc:
            self.start_error = str(exc)
            self.log.note(f"kfcockpit: cannot start {spec.argv[0]}: {exc}")
            self.exited(START_ERROR_STATUS)
        finally:
            os.close(write_fd)
        self.started = time.time()

    def exited(self, status: int) -> None:
        if not self.exit.done():
            self.exit.set_result(status)

    def terminate(self) -> None:
        """SIGTERM to the process group: a graceful stop (torchrun forwards it to its workers;
        the training core saves the step it is at and exits)."""
        if self.pid is not None and not self.exit.done():
            kill_group(self.pid, signal.SIGTERM)

    def signal_all(self, sig: int) -> None:
        """`sig` to every process of the run: its group and what it started in sessions of its own
        (SIGSTOP and SIGCONT: a pod frozen as a stuck machine freezes, and thawed)."""
        if self.pid is None or self.exit.done():
            return
        kill_group(self.pid, sig)
        for pid in marked_processes({ENV_CLUSTER: self.cluster_id, ENV_POD: self.key}):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def processes(self) -> list[int]:
        """The pids of the run: its first process and what it started, found by the pod's marker."""
        if self.pid is None or self.exit.done():
            return []
        return sorted({self.pid, *marked_processes({ENV_CLUSTER: self.cluster_id, ENV_POD: self.key})})

    def kill(self) -> list[int]:
        """SIGKILL the process group and whatever it started in sessions of its own, found by the
        pod's marker. Returns the pids found by their marker."""
        if self.pid is not None and not self.exit.done():  # once reaped, the pid may be reused
            kill_group(self.pid)
        return sweep({ENV_CLUSTER: self.cluster_id, ENV_POD: self.key})

    async def ended(self) -> int:
        """The wait status, once the process exited, nothing of it is left and its output is in."""
        status = await self.exit
        left = await wait_gone_async(self.kill(), _SWEPT_GONE_SECONDS)
        if left:
            log.error("pod %s: processes still alive after SIGKILL: %s", self.key, left)
        try:
            await asyncio.wait_for(asyncio.shield(self.log.closed), _LOG_DRAIN_SECONDS)
        except asyncio.TimeoutError:
            log.warning("pod %s: output still open %ss after exit; closing it", self.key, _LOG_DRAIN_SECONDS)
        self.log.close()
        return status
