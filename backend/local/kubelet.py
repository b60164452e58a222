"""The controller as the kubelet: its child processes, reaped on SIGCHLD (never polled), and
pods found, terminated and killed by name, whether a runner's (TrainJob, RayJob) or a bare pod
a client created (barepods.py). A part of Controller (controller.py), sharing its state.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from backend.cluster import NotFound
from backend.local import podspec
from backend.local.barepods import BarePod
from backend.local.layout import Layout
from backend.local.runner import Runner
from backend.processes import SpawnError, marked_processes, reap_exited, spawn, sweep, wait_gone

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

log = logging.getLogger("kfcockpit.controller")


class Kubelet:
    # The controller's state these methods use, made in Controller.__init__:
    layout: Layout
    api: ClusterApi
    runners: dict[str, Runner]
    bare_pods: dict[str, BarePod]
    _exits: dict[int, asyncio.Future[int]]

    check_idle: Callable[[], None]  # lifecycle.py

    # ------------------------------------------------------------------ processes

    def watch_exit(self, pid: int) -> asyncio.Future[int]:
        """A future with the wait status of our child `pid` (reaped on SIGCHLD, never polled)."""
        future = self._exits.get(pid)
        if future is None:
            future = self._exits[pid] = asyncio.get_running_loop().create_future()
        return future

    async def run_child(self, argv: list[str], output: Path | None = None) -> int:
        """Run a helper program of the controller's own (not a pod) and return its exit code;
        reaped by our SIGCHLD handler like every child. Its output goes to `output`, else nowhere."""
        fd = os.open(output or os.devnull, os.O_WRONLY | os.O_CLOEXEC | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            pid = spawn(argv, podspec.base_env(), podspec.PROJECT_ROOT, fd)
        except SpawnError as exc:
            log.warning("cannot run %s: %s", argv[0], exc)
            return 127
        finally:
            os.close(fd)
        return os.waitstatus_to_exitcode(await self.watch_exit(pid))

    def _reap(self) -> None:
        for pid, status in reap_exited():
            future = self._exits.pop(pid, None)
            if future is not None and not future.done():
                future.set_result(status)
            # Other pids are orphans of our pods re-parented to us (we are a subreaper): reaped.

    def _worker_exited(self, pod: str, status: int) -> None:
        for runner in self.runners.values():
            if runner.worker_exited(pod, status):
                return

    def _sweep_leftovers(self) -> None:
        """Kill whatever a previous controller of this state root left running, and wait for it."""
        marker = {podspec.ENV_CLUSTER: str(self.layout.root)}
        pids = sweep(marker)
        if not pids:
            return
        log.warning("killed %d process(es) left by a previous controller: %s", len(pids), pids)
        wait_gone(pids, 10)
        left = list(marked_processes(marker))
        if left:
            log.error("processes of this state root still alive after SIGKILL: %s", left)

    # ------------------------------------------------------------------ pods by name

    def _run_of(self, name: str):
        """(runner, run) of a job pod, or (None, None)."""
        for runner in self.runners.values():
            run = runner.runs.get(name)
            if run is not None:
                return runner, run
        return None, None

    def _running(self, name: str):
        """The run of a job pod whose process has not finished, or None."""
        _, run = self._run_of(name)
        return run if run is not None and run.finished is not None and not run.finished.done() else None

    def pod_finished(self, name: str) -> bool:
        _, run = self._run_of(name)
        return run is None or run.pod.phase.finished

    def pod_pid(self, name: str, namespace: str = "default") -> int | None:
        bare = self.bare_pods.get(f"{namespace}.{name}")
        if bare is not None:
            return bare.pid if bare.running() else None
        _, run = self._run_of(name)
        return getattr(run, "pid", None) if run is not None and not run.pod.phase.finished else None

    def _unschedulable(self, pod_name: str, why: str) -> None:
        runner, run = self._run_of(pod_name)
        if run is not None:
            run.pod.reason, run.pod.message = "Unschedulable", why
            runner._publish_pod(run.pod)

    def start_bare_pod(self, obj: dict) -> None:
        pod = BarePod(self, obj)
        self.bare_pods[pod.key] = pod
        pod.start()
        pod.task.add_done_callback(lambda _t: self.check_idle())

    def forget_bare_pod(self, key: str) -> None:
        pod = self.bare_pods.pop(key, None)
        if pod is not None:
            pod.log_path.unlink(missing_ok=True)

    def terminate_pod(self, name: str, grace: float) -> bool:
        """Graceful deletion: SIGTERM now, SIGKILL after `grace` seconds. False if not running."""
        run = self._running(name)
        if run is None:
            return False
        run.terminate()
        timer = asyncio.get_running_loop().call_later(grace, run.kill, str(self.layout.root))
        run.finished.add_done_callback(lambda _f: timer.cancel())
        return True

    def kill_pod(self, name: str) -> None:
        run = self._running(name)
        if run is not None:
            run.kill(str(self.layout.root))
            return
        raise NotFound(f"pod {name!r} not found or not running (see: kubectl get pods)")
