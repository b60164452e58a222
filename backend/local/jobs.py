"""One TrainJob's reconcile loop: create the worker group, watch it, apply the failure policy.

Like JobSet under Kubeflow Trainer: numNodes pods per attempt; when any pod fails or is killed,
the rest of the group is killed too and the whole group is recreated on a fresh rendezvous port
(new pod names, restart attempt + 1), up to the runtime's maxRestarts; then the job is Failed
with reason ReachedMaxRestarts. All pods succeeding makes the job Complete.

The rest of a failed group is stopped with SIGKILL, not a graceful SIGTERM: training state lives
in atomic checkpoints, so nothing is lost by it, and every millisecond here is recovery time.
A pod counts as finished when its process exited *and* its output pipe is drained, so the job's
final events come after its last log line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import signal
import socket
import time
from typing import TYPE_CHECKING

from backend.cluster import ClusterError
from backend.local import podspec
from backend.local.layout import write_atomic
from backend.local.podlogs import PodLog
from backend.local.processes import SpawnError, describe_exit, kill_group, spawn, sweep
from backend.models import (
    LABEL_JOB,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    Condition,
    JobPhase,
    JobSummary,
    Pod,
    PodPhase,
    TrainJob,
)

if TYPE_CHECKING:
    from backend.local.controller import Controller
    from backend.local.warm import Zygote

log = logging.getLogger("kfcockpit.controller")

LABEL_LAUNCH = "kfcockpit.io/launch"  # "warm" (forked from the zygote) or "exec" (the command as is)
_LOG_DRAIN_SECONDS = 5.0  # after exit, how long a pipe may stay open (held by a straggler)
_STEP_PUBLISH_SECONDS = 0.1  # pod step/loss updates are coalesced to this rate
_STEP_PERSIST_SECONDS = 2.0


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


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class PodRun:
    """A pod of the current group and the process behind it."""

    def __init__(self, pod: Pod):
        self.pod = pod
        self.pid: int | None = None
        self.log: PodLog | None = None
        self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.finished: asyncio.Task | None = None
        self.terminating = False  # killed as part of a group teardown, not on its own

    def exited(self, status: int) -> None:
        if not self.status.done():
            self.status.set_result(status)

    def kill(self, cluster_root: str) -> None:
        """SIGKILL the pod's process group, and whatever it started in sessions of its own
        (torchrun's workers), found by the marker in their environment."""
        if self.pid is not None and not self.status.done():  # once reaped, the pid may be reused
            kill_group(self.pid)
        sweep({podspec.ENV_CLUSTER: cluster_root, podspec.ENV_POD: self.pod.name})


class JobRunner:
    def __init__(self, ctl: "Controller", job: TrainJob, plan: podspec.JobPlan, summary: JobSummary,
                 pods: list[Pod] | None = None, log_index: list[list] | None = None):
        self.ctl = ctl
        self.job = job
        self.plan = plan
        self.summary = summary
        self.recovered_pods = pods or []
        self.runs: dict[str, PodRun] = {}
        self.log_index: list[list] = log_index or []  # [pod, rank] of every pod ever, for logs
        self.task: asyncio.Task | None = None
        self.logs_done = summary.phase.finished
        self._step_timer: asyncio.TimerHandle | None = None
        self._persist_timer: asyncio.TimerHandle | None = None
        self._dirty: set[str] = set()

    @property
    def name(self) -> str:
        return self.plan.name

    # ------------------------------------------------------------------ observed state

    def pods(self) -> list[Pod]:
        if self.runs:
            return [r.pod for r in self.runs.values()]
        return list(self.recovered_pods)

    def _publish_pod(self, pod: Pod, event_type: str = "MODIFIED") -> None:
        self.ctl.events.publish("pods", event_type, pod.model_dump(mode="json"), self.name)

    def _set_phase(self, phase: JobPhase, reason: str = "", message: str = "") -> None:
        s = self.summary
        if (s.phase, s.reason, s.message) == (phase, reason, message):
            return
        s.phase, s.reason, s.message = phase, reason, message
        if phase.finished:
            s.finished = time.time()
            s.conditions.append(Condition(type=phase.value, status="True", reason=reason,
                                          message=message, lastTransitionTime=_now_iso()))
        self.ctl.events.publish("jobs", "MODIFIED", s.model_dump(mode="json"), self.name)
        self.persist()
        if phase.finished:
            self.ctl.check_idle()

    def persist(self) -> None:
        if self._persist_timer is not None:
            self._persist_timer.cancel()
            self._persist_timer = None
        data = {
            "summary": self.summary.model_dump(mode="json"),
            "plan": self.plan.to_json(),
            "pods": [p.model_dump(mode="json") for p in self.pods()],
            "logs": self.log_index,
        }
        # Observed state: atomic, but not fsynced (a crash loses at most the newest status, and
        # the next controller re-derives it); fsync would sit on the recovery path.
        write_atomic(self.ctl.layout.job_status_file(self.name), json.dumps(data).encode(), durable=False)

    def _persist_soon(self) -> None:
        if self._persist_timer is None:
            self._persist_timer = asyncio.get_running_loop().call_later(_STEP_PERSIST_SECONDS, self.persist)

    # ------------------------------------------------------------------ the reconcile loop

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"job {self.name}")

    async def stop(self) -> None:
        """Kill the pods and end the loop (job deleted, or the controller shutting down)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        self._end_logs()

    async def _run(self) -> None:
        try:
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
        except asyncio.CancelledError:
            await self._teardown()
            raise
        except Exception as exc:  # a bug must not leave workers running
            log.exception("job %s: controller error", self.name)
            await self._teardown()
            self._set_phase(JobPhase.FAILED, "ControllerError", f"{type(exc).__name__}: {exc}")
        finally:
            self._end_logs()

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
        node = socket.gethostname()
        runs = []
        for rank in range(self.plan.num_nodes):
            name = podspec.pod_name(self.name, rank)
            pod = Pod(name=name, job=self.name, rank=rank, restart_attempt=attempt, node=node,
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
        await asyncio.gather(*(self._start(run, spec, zygote) for run, spec in zip(runs, specs)))
        if all(r.pod.phase == PodPhase.RUNNING for r in runs):
            self._set_phase(JobPhase.RUNNING)
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
        """Kill every pod of the group that is still running and wait until each is finished."""
        root = str(self.ctl.layout.root)
        for run in self.runs.values():
            if run.finished is None or not run.finished.done():
                run.terminating = True
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

    async def _start(self, run: PodRun, spec: podspec.LaunchSpec, zygote: Zygote | None) -> None:
        pod = run.pod
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        run.log = PodLog(self.ctl.layout.pod_log(self.name, pod.name), pod.name, pod.rank, self._on_lines)
        run.log.attach(read_fd)
        try:
            if zygote is not None:
                run.pid = await zygote.spawn(pod.name, spec, write_fd)
            else:
                # torchrun forwards SIGTERM to its workers; a plain program just ends.
                run.pid = spawn(spec.argv, spec.env, spec.cwd, write_fd, death_signal=signal.SIGTERM)
                self.ctl.watch_exit(run.pid).add_done_callback(lambda f: run.exited(f.result()))
        except (SpawnError, OSError) as exc:
            run.log.note(f"kfcockpit: cannot start {spec.argv[0]}: {exc}")
            pod.reason = "StartError"
            run.exited(127 << 8)
        finally:
            os.close(write_fd)
        pod.labels[LABEL_LAUNCH] = "warm" if zygote is not None else "exec"
        if run.pid is not None:
            pod.phase, pod.started = PodPhase.RUNNING, time.time()
            self._publish_pod(pod)
        run.finished = asyncio.create_task(self._finish_pod(run), name=f"pod {pod.name}")

    async def _finish_pod(self, run: PodRun) -> None:
        status = await run.status
        pod = run.pod
        # No process of a finished pod may outlive it (a container's processes die with it).
        run.kill(str(self.ctl.layout.root))
        try:
            await asyncio.wait_for(asyncio.shield(run.log.closed), _LOG_DRAIN_SECONDS)
        except asyncio.TimeoutError:
            log.warning("pod %s: output still open %ss after exit; closing it", pod.name, _LOG_DRAIN_SECONDS)
        run.log.close()
        self._take_step(run)
        code, reason = describe_exit(status)
        pod.exit_code = code
        pod.reason = pod.reason if pod.reason == "StartError" else "Terminated" if run.terminating else reason
        pod.phase = PodPhase.SUCCEEDED if code == 0 else PodPhase.FAILED
        pod.finished = time.time()
        self._dirty.discard(pod.name)
        self._publish_pod(pod)
        self.persist()

    def worker_exited(self, pod_name: str, status: int) -> bool:
        run = self.runs.get(pod_name)
        if run is None:
            return False
        run.exited(status)
        return True

    # ------------------------------------------------------------------ logs and steps

    def _on_lines(self, podlog: PodLog, offset: int, lines: list[tuple[float, str]]) -> None:
        self.ctl.events.send("logs", self.name, {"pod": podlog.pod, "rank": podlog.rank,
                                                "offset": offset, "lines": lines})
        run = self.runs.get(podlog.pod)
        if run is not None and podlog.last_step is not None and podlog.last_step[0] != run.pod.last_step:
            self._dirty.add(podlog.pod)
            if self._step_timer is None:
                self._step_timer = asyncio.get_running_loop().call_later(_STEP_PUBLISH_SECONDS, self._flush_steps)

    def _take_step(self, run: PodRun) -> bool:
        if run.log is None or run.log.last_step is None:
            return False
        step, loss = run.log.last_step
        if (run.pod.last_step, run.pod.last_loss) == (step, loss):
            return False
        run.pod.last_step, run.pod.last_loss = step, loss
        return True

    def _flush_steps(self) -> None:
        self._step_timer = None
        for name in list(self._dirty):
            run = self.runs.get(name)
            if run is not None and self._take_step(run):
                self._publish_pod(run.pod)
        self._dirty.clear()
        self._persist_soon()

    def _end_logs(self) -> None:
        if not self.logs_done:
            self.logs_done = True
            self.ctl.events.send("logs", self.name, {"end": True})

    def cancel_timers(self) -> None:
        for timer in (self._step_timer, self._persist_timer):
            if timer is not None:
                timer.cancel()
