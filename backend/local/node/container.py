"""One run of a pod's container: the node's container runtime, with processes for containers.

A run is a process in a session of its own, exec'd (the command as is) or forked by a zygote
that has torch imported (warm.py), below a shim of its own (shim.py, as containerd-shim) that
writes its output to its log file and records its exit: the run outlives the kubelet and the
controller process, as a kubelet's containers outlive the kubelet, and a new kubelet adopts it
(`adopt`). The kubelet follows the file (logs.FollowedLog) and learns the end from a pidfd on
the shim. Its processes are in the pod's cgroups. Every process of it carries the node's and the
pod's markers in its environment (ENV_CLUSTER, ENV_POD), so the end of a run finds and kills
what it started in sessions of its own (torchrun's workers, a Ray driver's processes). A run has
ended when its process exited, its marked descendants are gone and its output is drained, so the
pod's final status comes after its last log line.

A Ray driver's run (its log a PodLog with a router: its output holds its workers' lines) is the
kubelet's own child instead, its pipe read by the kubelet; it dies with the node
(PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
import time
from typing import Awaitable, Callable

from backend.local.node import confine, shim
from backend.local.node.logs import FollowedLog, PodLog
from backend.local.node.podspec import ENV_CLUSTER, ENV_POD, PROJECT_ROOT, LaunchSpec, base_env
from backend.processes import SpawnError, kill_group, marked_processes, open_pidfd, spawn, sweep, wait_gone_async

log = logging.getLogger("kfcockpit.kubelet")

_LOG_DRAIN_SECONDS = 5.0  # after exit, how long a pipe may stay open (held by a straggler)
_SWEPT_GONE_SECONDS = 10.0  # how long SIGKILLed descendants may take to be gone
START_ERROR_STATUS = 127 << 8  # the wait status of a command that could not start

# (the shim's request, the socket its shim reports on) -> once the zygote took the request
Fork = Callable[[dict, int], Awaitable[None]]
LOST_NOTE = "its processes were lost when the node's kubelet stopped"


class Container:
    def __init__(self, key: str, cluster_id: str, log: PodLog | FollowedLog):
        self.key, self.cluster_id, self.log = key, cluster_id, log
        self.pid: int | None = None
        self.exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.started = time.time()
        self.warm = False
        self.start_error = ""
        self.note = ""  # why it failed, when the node learned it from its output (a Ray driver's)
        self.devices = ""  # the GPUs its shim recorded (an adopted run's)
        self._adopted = False

    @property
    def marker(self) -> dict[str, str]:
        return {ENV_CLUSTER: self.cluster_id, ENV_POD: self.key}

    async def start(self, spec: LaunchSpec, exit_of: Callable[[int], asyncio.Future],
                    fork: Fork | None = None, cgroups: tuple[str, ...] = ()) -> None:
        """Start the process below its shim (forked by `fork` when the spec is warm and one is
        given, else exec'd). One that cannot start has ended at once with exit code 127."""
        if isinstance(self.log, PodLog):
            await self._start_direct(spec, exit_of, cgroups)
            return
        request = {"log": str(self.log.path), "marker": self.marker, "cwd": spec.cwd, "cgroups": list(cgroups),
                   "confine": spec.confine, "devices": spec.env.get("NVIDIA_VISIBLE_DEVICES", "")}
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            if fork is not None and spec.warm is not None:
                self.warm = True
                kind, target, args = spec.warm
                await fork({**request, "kind": kind, "target": target, "args": args, "env": spec.warm_env},
                           theirs.fileno())
            else:
                env = {**base_env(), ENV_CLUSTER: self.cluster_id}  # the shim's: found by the sweep at start
                # -S: no site-packages (the shim needs none), so it starts in a few milliseconds
                spawn([sys.executable, "-S", "-m", "backend.local.node.shim", "--fd", str(theirs.fileno())], env,
                      PROJECT_ROOT, sys.stderr.fileno(), death_signal=0, keep_fds=(theirs.fileno(),))
                mine.send(json.dumps({**request, "argv": spec.argv, "env": spec.env}).encode())
            theirs.close()
            mine.setblocking(False)
            try:
                report = json.loads(await asyncio.get_running_loop().sock_recv(mine, shim.MAX_REQUEST) or b"{}")
            except asyncio.CancelledError:  # given up while starting: end the run once it is reported
                self._kill_when_reported(mine)
                raise
            mine.close()
            if "pid" not in report:
                raise SpawnError(report.get("error") or "its shim exited before starting it")
        except (SpawnError, OSError) as exc:
            theirs.close()
            mine.close()
            self._cannot_start(spec, exc)
            return
        self._watch(report)

    def _kill_when_reported(self, mine: socket.socket) -> None:
        loop = asyncio.get_running_loop()

        def readable() -> None:
            loop.remove_reader(mine.fileno())
            try:
                report = json.loads(mine.recv(shim.MAX_REQUEST) or b"{}")
            except (OSError, ValueError):
                report = {}
            mine.close()
            if "pid" in report:
                kill_group(report["pid"])
        loop.add_reader(mine.fileno(), readable)

    def adopt(self, record: dict | None, status: int | None) -> None:
        """The run a previous kubelet started: its shim's `record` while it lives, else the wait
        status its shim recorded (None: none did, its processes were lost)."""
        self._adopted = True
        if record is not None:
            self._watch(record)
        else:
            self._shim_gone()

    def _watch(self, record: dict) -> None:
        """Follow the run through its shim: its end is the shim's exit."""
        self.pid, self.started, self.devices = record["pid"], record["started"], record.get("devices") or ""
        fd = open_pidfd(record["shim"], record["start"])
        if fd is None:
            self._shim_gone()
            return
        loop = asyncio.get_running_loop()

        def exited() -> None:
            loop.remove_reader(fd)
            os.close(fd)
            self._shim_gone()
        loop.add_reader(fd, exited)

    def _shim_gone(self) -> None:
        status = shim.recorded_status(self.log.path)
        if status is None or (self._adopted and status == shim.LOST_STATUS):
            self.note = LOST_NOTE  # killed with the node, or the shim itself killed
        self.exited(shim.LOST_STATUS if status is None else status)

    def _cannot_start(self, spec: LaunchSpec, exc: Exception) -> None:
        self.start_error = str(exc)
        self.log.note(f"kfcockpit: cannot start {spec.argv[0]}: {exc}")
        self.exited(START_ERROR_STATUS)

    async def _start_direct(self, spec: LaunchSpec, exit_of: Callable[[int], asyncio.Future],
                            cgroups: tuple[str, ...]) -> None:
        """A Ray driver's: the kubelet's own child, its output read by the kubelet."""
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        self.log.attach(read_fd)
        try:
            # a Ray driver shuts its Ray down on SIGTERM. No PID namespace (it needs a shim to hold
            # it): its workers are known by the pids they print (raypods.py).
            plan = spec.confine and {**spec.confine, "pid_namespace": False}
            self.pid = spawn(spec.argv, spec.env, spec.cwd, write_fd, death_signal=signal.SIGTERM,
                             cgroups=cgroups, before_exec=(lambda: confine.enter(plan)) if plan else None)
            exit_of(self.pid).add_done_callback(lambda f: self.exited(f.result()))
        except (SpawnError, OSError) as exc:
            self._cannot_start(spec, exc)
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
        for pid in marked_processes(self.marker):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def processes(self) -> list[int]:
        """The pids of the run: its first process and what it started, found by the pod's marker."""
        if self.pid is None or self.exit.done():
            return []
        return sorted({self.pid, *marked_processes(self.marker)})

    def kill(self) -> list[int]:
        """SIGKILL the process group and whatever it started in sessions of its own, found by the
        pod's marker. Returns the pids found by their marker."""
        if self.pid is not None and not self.exit.done():  # once reaped, the pid may be reused
            kill_group(self.pid)
        return sweep(self.marker)

    async def ended(self) -> int:
        """The wait status, once the process exited, nothing of it is left and its output is in."""
        status = await self.exit
        left = await wait_gone_async(self.kill(), _SWEPT_GONE_SECONDS)
        if left:
            log.error("pod %s: processes still alive after SIGKILL: %s", self.key, left)
        if isinstance(self.log, PodLog):  # its shim drained a shimmed run's output before it exited
            try:
                await asyncio.wait_for(asyncio.shield(self.log.closed), _LOG_DRAIN_SECONDS)
            except asyncio.TimeoutError:
                log.warning("pod %s: output still open %ss after exit; closing it", self.key, _LOG_DRAIN_SECONDS)
        self.log.close()
        return status
