"""What every job runner of the controller shares: the observed state it publishes and persists.

A runner reconciles one job (jobs.JobRunner a TrainJob, rayjobs.RayJobRunner a RayJob) into pods.
Both publish pod and job changes as watch events, persist the job's status file, turn each pod's
log lines into log events and coalesce the newest step/loss into the Pod. What differs, how the
pods are started, watched and restarted, is theirs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from backend.errors import ClusterError
from backend.local import podspec
from training.atomic import write_atomic
from backend.local.podlogs import PodLog
from backend.processes import SpawnError, describe_exit, kill_group, spawn, sweep, wait_gone_async
from backend.models import Condition, JobPhase, JobSummary, Pod, PodPhase

if TYPE_CHECKING:
    from backend.local.controller import Controller

log = logging.getLogger("kfcockpit.controller")

LABEL_LAUNCH = "kfcockpit.io/launch"  # "warm" (forked from the zygote) or "exec" (the command as is)
_STEP_PUBLISH_SECONDS = 0.1  # pod step/loss updates are coalesced to this rate
_STEP_PERSIST_SECONDS = 2.0
_LOG_DRAIN_SECONDS = 5.0  # after exit, how long a pipe may stay open (held by a straggler)
_SWEPT_GONE_SECONDS = 10.0  # how long SIGKILLed descendants may take to be gone


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class PodRun:
    """A pod whose process the controller started (or the zygote forked for it)."""

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

    def terminate(self) -> None:
        """SIGTERM to the pod's process group: a graceful stop (torchrun forwards it to its
        workers; the training core saves the step it is at and exits)."""
        if self.pid is not None and not self.status.done():
            kill_group(self.pid, signal.SIGTERM)

    def kill(self, cluster_root: str) -> list[int]:
        """SIGKILL the pod's process group, and whatever it started in sessions of its own
        (torchrun's workers, Ray's processes), found by the marker in their environment.
        Returns the pids found by their marker."""
        if self.pid is not None and not self.status.done():  # once reaped, the pid may be reused
            kill_group(self.pid)
        return sweep({podspec.ENV_CLUSTER: cluster_root, podspec.ENV_POD: self.pod.name})


class Runner:
    kind = ""  # the resource kind it runs

    def __init__(self, ctl: "Controller", job: Any, plan: Any, summary: JobSummary,
                 pods: list[Pod] | None = None, log_index: list[list] | None = None):
        self.ctl = ctl
        self.job = job
        self.plan = plan  # has .name and .to_json()
        self.summary = summary
        self.recovered_pods = pods or []
        self.runs: dict[str, Any] = {}  # pod name -> its run (.pod, .log, .finished, .kill(root))
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
                                          message=message, lastTransitionTime=now_iso()))
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
        self.task = asyncio.create_task(self._run(), name=f"{self.kind} {self.name}")

    async def _run(self) -> None:
        try:
            await self._reconcile()
        except asyncio.CancelledError:
            await self._teardown()
            raise
        except ClusterError as exc:  # what the pods need is missing (a ConfigMap, a volume)
            await self._teardown()
            self._set_phase(JobPhase.FAILED, "CreateContainerConfigError", str(exc))
        except Exception as exc:  # a bug must not leave processes running
            log.exception("%s %s: controller error", self.kind, self.name)
            await self._teardown()
            self._set_phase(JobPhase.FAILED, "ControllerError", f"{type(exc).__name__}: {exc}")
        finally:
            self._end_logs()

    async def _reconcile(self) -> None:
        """Run the job to its end (the kind's own rules)."""
        raise NotImplementedError

    async def _teardown(self) -> None:
        """Kill every process of the job still running and wait until each is finished."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Kill the pods and end the loop (job deleted, or the controller shutting down); no timer
        of the job fires after it."""
        try:
            if self.task is not None and not self.task.done():
                self.task.cancel()
                try:
                    await self.task
                except asyncio.CancelledError:
                    pass
            self._end_logs()
        finally:
            self.cancel_timers()

    def worker_exited(self, pod_name: str, status: int) -> bool:
        """A warm worker (forked by the zygote) of ours exited; False if it is not ours."""
        return False

    # ------------------------------------------------------------------ a pod's process

    async def _start_pod(self, run: PodRun, argv: list[str], env: dict[str, str], cwd: str,
                         warm: Callable[[int], Awaitable[int]] | None = None,
                         router: Callable[[list[bytes]], None] | None = None) -> None:
        """Start the pod's process with its output on a pipe to its log: forked by `warm(fd)`
        (the zygote), else exec'd. Its end is handled by `run.finished` (`_finish_pod`)."""
        pod = run.pod
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        run.log = PodLog(self.ctl.layout.pod_log(self.name, pod.name), pod.name, pod.rank, self._on_lines, router)
        run.log.attach(read_fd)
        try:
            if warm is not None:
                run.pid = await warm(write_fd)
            else:
                # torchrun forwards SIGTERM to its workers, a Ray driver shuts its Ray down; a
                # plain program just ends.
                run.pid = spawn(argv, env, cwd, write_fd, death_signal=signal.SIGTERM)
                self.ctl.watch_exit(run.pid).add_done_callback(lambda f: run.exited(f.result()))
        except (SpawnError, OSError) as exc:
            run.log.note(f"kfcockpit: cannot start {argv[0]}: {exc}")
            pod.reason = "StartError"
            run.exited(127 << 8)
        finally:
            os.close(write_fd)
        pod.labels[LABEL_LAUNCH] = "warm" if warm is not None else "exec"
        if run.pid is not None:
            pod.phase, pod.started = PodPhase.RUNNING, time.time()
            self._publish_pod(pod)
        if run.finished is None:  # else the caller's task runs the pod's whole life (jobs.py)
            run.finished = asyncio.create_task(self._finish_pod(run), name=f"pod {pod.name}")

    async def _finish_pod(self, run: PodRun) -> None:
        status = await run.status
        pod = run.pod
        # No process of a finished pod may outlive it (a container's processes die with it).
        left = await wait_gone_async(run.kill(str(self.ctl.layout.root)), _SWEPT_GONE_SECONDS)
        if left:
            log.error("pod %s: processes still alive after SIGKILL: %s", pod.name, left)
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

    # ------------------------------------------------------------------ logs and steps

    def _on_lines(self, podlog: PodLog, offset: int, lines: list[tuple[float, str]]) -> None:
        self.ctl.events.send("logs", self.name, {"pod": podlog.pod, "rank": podlog.rank,
                                                "offset": offset, "lines": lines})
        run = self.runs.get(podlog.pod)
        if run is not None and podlog.last_step is not None and podlog.last_step[0] != run.pod.last_step:
            self._dirty.add(podlog.pod)
            if self._step_timer is None:
                self._step_timer = asyncio.get_running_loop().call_later(_STEP_PUBLISH_SECONDS, self._flush_steps)

    def _take_step(self, run) -> bool:
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
