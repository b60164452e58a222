"""One TrainJob's reconcile loop: create the worker group, watch it, apply the failure policy.

Like JobSet under Kubeflow Trainer: numNodes pods per attempt; when any pod fails or is killed,
the rest of the group is killed too and the whole group is recreated on a fresh rendezvous port
(new pod names, restart attempt + 1), up to the runtime's maxRestarts; then the job is Failed
with reason ReachedMaxRestarts. All pods succeeding makes the job Complete.

The rest of a failed group is stopped as JobSet deletes its Jobs' pods: SIGTERM, then SIGKILL once
the pod's grace period (terminationGracePeriodSeconds, 30 s by default) has passed. Survivors use
that moment to save the step they are at, so the next attempt loses almost no work.
A pod counts as finished when its process exited *and* its output pipe is drained, so the job's
final events come after its last log line.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from typing import TYPE_CHECKING

from backend.cluster import ClusterError
from backend.local import podspec
from backend.local.runner import PodRun, Runner
from backend.local.scheduler import Requests
from backend.models import (
    LABEL_JOB,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    JobPhase,
    Pod,
    PodPhase,
)

if TYPE_CHECKING:
    from backend.local.warm import Zygote

log = logging.getLogger("kfcockpit.controller")



def _rendezvous_ports() -> range:
    """Ports below the kernel's ephemeral range (as torchrun's 29500 is). Ephemeral ports are what
    every other store binds with port 0 and what outgoing connections use: one picked from there
    may be taken before rank 0 binds it, or still be dialled by another job's workers retrying
    their dead store, which would then join this group's rendezvous."""
    try:
        low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(20000, low) if low > 21000 else range(high + 1, 65536)


def free_port() -> int:
    """A fresh rendezvous port per attempt (torchrun's restart reusing its store often hangs)."""
    ports = _rendezvous_ports()
    for _ in range(200):
        port = random.choice(ports)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: also refuses ports in TIME_WAIT
            except OSError:
                continue
            return port
    raise ClusterError("no free rendezvous port found outside the ephemeral range")


class JobRunner(Runner):
    kind = "TrainJob"

    async def _reconcile(self) -> None:
        """Run the job to its end; with activeDeadlineSeconds, no longer than that from its start
        (trainer v2.3.0: the pods are terminated, Failed with reason DeadlineExceeded)."""
        deadline = self.plan.deadline_seconds
        if deadline is None:
            await self._run_to_end()
            return
        try:
            await asyncio.wait_for(self._run_to_end(), max(0.0, deadline - (time.time() - self.summary.created)))
        except asyncio.TimeoutError:
            await self._teardown()
            self._set_phase(JobPhase.FAILED, "DeadlineExceeded",
                            f"TrainJob was active longer than its activeDeadlineSeconds ({deadline:g} s)")

    async def _run_to_end(self) -> None:
        failure = self._recover() if self.recovered_pods or self.summary.phase != JobPhase.CREATED else None
        if failure == "":  # recovered a group that had succeeded
            self._complete()
            return
        while True:
            if failure is not None:
                if self.summary.restart_attempt >= self.plan.max_restarts:
                    self._set_phase(JobPhase.FAILED, "ReachedMaxRestarts",
                                    f"restarted {self.summary.restart_attempt} times (maxRestarts "
                                    f"{self.plan.max_restarts}); last failure: {failure}")
                    return
                self.summary.restart_attempt += 1
            failure = await self._run_group()
            if failure is None:
                self._complete()
                return

    def _recover(self) -> str | None:
        """After a controller restart: what became of the group the old controller ran.
        Returns "" if it had succeeded, else the failure to apply the policy to."""
        pods = [p for p in self.recovered_pods if p.restart_attempt == self.summary.restart_attempt]
        if pods and all(p.phase == PodPhase.SUCCEEDED for p in pods):
            return ""
        for pod in pods:
            if not pod.phase.finished:
                pod.phase, pod.reason, pod.finished = PodPhase.FAILED, "Lost", time.time()
                self._publish_pod(pod)
        if self.summary.phase == JobPhase.RESTARTING and self.summary.reason == "WorkerFailed":
            return self.summary.message  # the old controller had seen the failure itself
        return "the controller running the group stopped (its pods were lost)"

    def _complete(self) -> None:
        self._set_phase(JobPhase.COMPLETE, "AllJobsCompleted", "all workers exited with code 0")

    async def _run_group(self) -> str | None:
        """One attempt: create the pods, start them, wait. None on success, else the failure."""
        for pod in self.recovered_pods + [r.pod for r in self.runs.values()]:
            self._publish_pod(pod, "DELETED")  # the previous group's pods are replaced
        self.recovered_pods, self.runs = [], {}
        attempt = self.summary.restart_attempt
        port = free_port()
        runs = []
        for rank in range(self.plan.num_nodes):
            name = podspec.pod_name(self.name, rank)
            pod = Pod(name=name, job=self.name, rank=rank, restart_attempt=attempt,
                      created=time.time(), image=self.plan.image,
                      labels={LABEL_JOB: self.name, LABEL_RANK: str(rank), LABEL_RESTART_ATTEMPT: str(attempt)})
            run = self.runs[name] = PodRun(pod)
            runs.append(run)
            self.log_index.append([name, rank])
            self._publish_pod(pod, "ADDED")
        if attempt:
            self._set_phase(JobPhase.RESTARTING, "Restarting", f"group recreated, restart attempt {attempt}")
        self.persist()
        mounts = self.ctl.mount_dirs(self.plan)
        specs = [podspec.launch_spec(self.plan, r.pod.rank, port, r.pod.name, self.ctl.layout.root, mounts)
                 for r in runs]
        zygote = await self._launcher(specs[0])
        for run, spec in zip(runs, specs):
            run.finished = asyncio.create_task(self._pod_life(run, spec, zygote), name=f"pod {run.pod.name}")
        pending = {r.finished for r in runs}
        failure = None
        while pending and failure is None:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for run in runs:
                if run.finished in done and run.pod.phase == PodPhase.FAILED and failure is None:
                    failure = self._describe_failure(run.pod)
        if failure is None:
            return None
        self._set_phase(JobPhase.RESTARTING, "WorkerFailed", failure)
        await self._teardown()
        return failure

    @staticmethod
    def _describe_failure(pod: Pod) -> str:
        what = "was killed" if pod.reason == "Killed" else "failed" if pod.reason != "StartError" else "could not start"
        return f"pod {pod.name} {what} (exit code {pod.exit_code})"

    async def _teardown(self) -> None:
        """Stop every pod of the group still running (SIGTERM, SIGKILL after the grace period)
        and wait until each is finished."""
        root = str(self.ctl.layout.root)
        running = [r for r in self.runs.values() if r.finished is None or not r.finished.done()]
        for run in running:
            run.terminating = True
            if self.ctl.scheduler.is_waiting(run.pod.name) and run.finished is not None:
                run.finished.cancel()  # never bound: no process to stop
            else:
                run.terminate()
        graceful = [r.finished for r in running if r.finished is not None and r.pid is not None]
        if graceful and self.plan.grace_seconds > 0:
            await asyncio.wait(graceful, timeout=self.plan.grace_seconds)
        for run in running:
            if run.finished is None or not run.finished.done():
                run.kill(root)
        waiting = [r.finished for r in self.runs.values() if r.finished is not None]
        if waiting:
            await asyncio.gather(*waiting, return_exceptions=True)

    # ------------------------------------------------------------------ one pod

    async def _launcher(self, spec: podspec.LaunchSpec) -> Zygote | None:
        """How this group starts: all pods warm, or all exact. Never mixed: a warm rank 0 hosts
        the rendezvous store itself, torchrun's agents expect one of their own."""
        if spec.warm is None:
            return None
        zygote = self.ctl.zygotes.get(spec.zygote_key)
        if await zygote.ready and zygote.usable:
            return zygote
        log.warning("job %s: warm workers unavailable (%s); running the command as is", self.name, zygote.problem)
        return None

    async def _pod_life(self, run: PodRun, spec: podspec.LaunchSpec, zygote: Zygote | None) -> None:
        """One pod: bound by the scheduler (Pending until its requests fit), started, finished."""
        scheduler = self.ctl.scheduler
        await scheduler.bind(run.pod.name, Requests.of(self.plan.requests))
        try:
            if run.pod.reason == "Unschedulable":
                run.pod.reason = run.pod.message = ""
            run.pod.node = socket.gethostname()  # bound (published with its start)
            await self._start(run, spec, zygote)
            if run.terminating:  # the group was torn down while this pod was starting
                run.kill(str(self.ctl.layout.root))
            elif all(r.pod.phase == PodPhase.RUNNING for r in self.runs.values()):
                self._set_phase(JobPhase.RUNNING)
            await self._finish_pod(run)
        finally:
            scheduler.release(run.pod.name)

    async def _start(self, run: PodRun, spec: podspec.LaunchSpec, zygote: Zygote | None) -> None:
        warm = None if zygote is None else (lambda write_fd: zygote.spawn(run.pod.name, spec, write_fd))
        await self._start_pod(run, spec.argv, spec.env, spec.cwd, warm)

    def worker_exited(self, pod_name: str, status: int) -> bool:
        run = self.runs.get(pod_name)
        if run is None:
            return False
        run.exited(status)
        return True
