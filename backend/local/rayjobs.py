"""One RayJob's reconcile loop: a driver pod runs the entrypoint; its Ray Train workers are pods too.

KubeRay at one machine's scale. The driver pod (`<job>-driver-<5 chars>`, rank -1) runs the
entrypoint (rayplan.py), which starts a private Ray on 127.0.0.1 and Ray Train's worker group.
Ray forwards every worker's output through the driver, each line prefixed with the pid that
printed it; the controller reads the driver's pipe as it becomes readable and hands each line to
the pod it belongs to (`_route`). A worker becomes a pod `<job>-worker-<rank>-<5 chars>` when its
`event=start rank=R pid=P` line arrives, and its process is watched through a pidfd (it is Ray's
child, not ours). Killing a worker pod SIGKILLs that Ray worker process.

Ray, not the controller, restarts a failed group (FailureConfig): the new group's start lines make
new worker pods with restart attempt + 1, and the previous group's pods end Failed (Killed, or
Terminated with their group) and are replaced, as a TrainJob's are. The job ends with its driver:
Complete on exit 0, else Failed.

A worker's exit is only a failure if nothing says otherwise: Ray forwards lines a little after
they are printed, so a worker that printed `event=done` may be seen exiting before that line
arrives. Such an exit stays open until the line comes, the group is replaced, or the driver ends.

No Ray process outlives its driver pod: they all inherit the driver pod's env marker, and when
the driver exits (or the job is torn down) every process so marked is killed and waited for. A
RayJob does not survive its controller: Ray's state dies with the driver, so a new controller
marks an unfinished RayJob Failed (DriverLost) instead of starting it over.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time

from backend.local import podspec, rayplan
from backend.local.podlogs import PodLog
from backend.local.runner import PodRun, Runner
from backend.models import (
    DRIVER_RANK,
    LABEL_JOB,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    Condition,
    JobPhase,
    JobSummary,
    Pod,
    PodPhase,
    RayJob,
)
from backend.raytrain.groups import WorkerGroups
from backend.raytrain.tempdir import prune_sessions, ray_temp_dir
from training.logfmt import parse_line

LABEL_RAY_ROLE = "kfcockpit.io/ray-role"  # "driver" or "worker"; KubeRay's own labels too (rayplan.kuberay_labels)
# `(RayTrainWorker pid=4242) text` or `(pid=4242, ip=10.0.0.2) text`: who printed a forwarded line
_PREFIX = re.compile(rb"^\((?:[^()]*? )?pid=(\d+)(?:, ip=[^)]*)?\) ")
_ERROR_LINE = re.compile(rb"^[\w.-]+: error: ")
_KILLED_EXIT_CODE = 128 + signal.SIGKILL


def split_prefix(raw: bytes) -> tuple[int | None, bytes]:
    """(pid of the Ray process that printed it, the line as printed) of one driver output line."""
    match = _PREFIX.match(raw)
    if match is None:
        return None, raw
    return int(match.group(1)), raw[match.end():]


class WorkerRun:
    """A Ray Train worker shown as a pod. Its process is Ray's, watched through a pidfd."""

    def __init__(self, pod: Pod, pid: int, log: PodLog):
        self.pod, self.pid, self.log = pod, pid, log
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # process gone
        self.killed = False  # by kill_pod
        self.done = False  # printed event=done
        self.settled = False  # its final phase is published
        self._fd: int | None = None

    def watch(self, on_gone) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._fd = os.pidfd_open(self.pid)
        except OSError:  # gone already
            loop.call_soon(self._gone, on_gone)
            return
        loop.add_reader(self._fd, self._gone, on_gone)

    def _gone(self, on_gone) -> None:
        self._close_fd()
        if not self.finished.done():
            self.finished.set_result(None)
            on_gone(self)

    def kill(self, cluster_root: str) -> None:
        self.killed = True
        if self._fd is not None:
            try:
                signal.pidfd_send_signal(self._fd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _close_fd(self) -> None:
        if self._fd is not None:
            asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._close_fd()
        self.log.close()


class RayJobRunner(Runner):
    kind = "RayJob"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.driver: PodRun | None = None
        self.by_pid: dict[int, WorkerRun] = {}  # every worker this driver started
        self.group: dict[int, WorkerRun] = {}  # rank -> worker of the current group
        self.groups = WorkerGroups()
        self.failure = ""  # what the driver said when it gave up (event=failed, or a CLI's error line)
        self.lost = False  # recovered without a status: it ran under a controller that is gone

    # ------------------------------------------------------------------ the reconcile loop

    async def _reconcile(self) -> None:
        if self.lost or self.recovered_pods or self.summary.phase != JobPhase.CREATED:
            self._lost()
            return
        await self._start_driver()
        await asyncio.shield(self.driver.finished)  # a cancelled loop still lets it finish
        self._driver_ended()

    def _lost(self) -> None:
        """After a controller restart: the driver and its Ray died with the old controller."""
        for pod in self.recovered_pods:
            if not pod.phase.finished:
                pod.phase, pod.reason, pod.finished = PodPhase.FAILED, "Lost", time.time()
                self._publish_pod(pod)
        self._set_phase(JobPhase.FAILED, "DriverLost",
                        "the controller running its driver stopped, and Ray's state with it; "
                        "apply the RayJob again under a new name to run it again")

    async def _start_driver(self) -> None:
        name = rayplan.driver_pod_name(self.name)
        pod = Pod(name=name, job=self.name, rank=DRIVER_RANK, node=socket.gethostname(), created=time.time(),
                  image=self.plan.image, labels={LABEL_JOB: self.name, LABEL_RANK: "driver",
                                                 LABEL_RESTART_ATTEMPT: "0", LABEL_RAY_ROLE: "driver",
                                                 **rayplan.kuberay_labels(self.job, "driver")})
        self.driver = self.runs[name] = PodRun(pod)
        self.log_index.append([name, DRIVER_RANK])
        self._publish_pod(pod, "ADDED")
        self.persist()
        temp = ray_temp_dir(self.ctl.layout.home)
        temp.mkdir(parents=True, exist_ok=True)
        prune_sessions(temp)
        argv, env = rayplan.driver_launch(self.plan, name, self.ctl.layout.root, self.ctl.mount_dirs(self.plan), temp)
        await self._start_pod(self.driver, argv, env, podspec.PROJECT_ROOT, router=self._route)
        if self.plan.ignored:
            self.driver.log.note(f"kfcockpit: runtimeEnvYAML {', '.join(self.plan.ignored)} not applied on the "
                                 "embedded cluster (its pods run this environment)")

    async def _teardown(self) -> None:
        """Job deleted or controller stopping: the driver and every Ray process go, now."""
        driver = self.driver
        if driver is not None and driver.finished is not None:
            if not driver.finished.done():
                driver.terminating = True
                driver.kill(str(self.ctl.layout.root))
            await asyncio.gather(driver.finished, return_exceptions=True)
        self._close_workers()

    def _driver_ended(self) -> None:
        """The driver pod is finished (its Ray processes gone, its output drained): so is the job."""
        pod = self.driver.pod
        succeeded = pod.phase == PodPhase.SUCCEEDED
        for run in self.by_pid.values():
            if not run.settled:
                final = run.done or (succeeded and self.group.get(run.pod.rank) is run)
                self._settle(run, PodPhase.SUCCEEDED if final else PodPhase.FAILED,
                             "Completed" if final else "Terminated", 0 if final else None)
        self._close_workers()
        if succeeded:
            self._set_phase(JobPhase.COMPLETE, "Succeeded", "the driver exited with code 0")
        else:
            said = f": {self.failure}" if self.failure else ""
            self._set_phase(JobPhase.FAILED, "AppFailed",
                            f"the driver {pod.name} exited with code {pod.exit_code}{said}")

    def _close_workers(self) -> None:
        for run in self.by_pid.values():
            run.close()

    # ------------------------------------------------------------------ the driver's output

    def _route(self, raw_lines: list[bytes]) -> None:
        """Hand each line of the driver's output to the log of the pod that printed it."""
        batches: dict[PodLog, list[bytes]] = {}
        for raw in raw_lines:
            pid, text = split_prefix(raw)
            worker = self._worker_of(pid, text)
            target, line = (worker.log, text) if worker is not None else (self.driver.log, raw)
            batches.setdefault(target, []).append(line)
            if worker is None:
                self._note_failure(raw)
        for target, lines in batches.items():
            target.write(lines)

    def _note_failure(self, raw: bytes) -> None:
        if b"event=failed" in raw:
            self.failure = parse_line(raw.decode(errors="replace")).get("reason", "") or self.failure
        elif _ERROR_LINE.match(raw):  # `prog: error: ...`, how a refused command line says why
            self.failure = raw.decode(errors="replace").strip()

    def _worker_of(self, pid: int | None, text: bytes) -> WorkerRun | None:
        if pid is not None and b"event=" not in text:  # a step line: its prefix says whose (no parse)
            return self.by_pid.get(pid)
        fields = parse_line(text.decode(errors="replace")) if b"=" in text else {}
        event = fields.get("event")
        if event == "start" and "rank" in fields and "pid" in fields:
            try:
                return self._worker_started(int(fields["rank"]), int(fields["pid"]))
            except ValueError:
                pass
        if pid is not None:
            worker = self.by_pid.get(pid)
        else:  # no prefix (a driver that turned it off): the rank field of a worker's logfmt line
            rank = fields.get("rank", "")
            worker = self.group.get(int(rank)) if rank.isdigit() and ("step" in fields or event) else None
        if worker is not None and event == "done":
            worker.done = True
            if worker.finished.done():
                self._settle(worker, PodPhase.SUCCEEDED, "Completed", 0)
        return worker

    # ------------------------------------------------------------------ worker pods

    def _worker_started(self, rank: int, pid: int) -> WorkerRun:
        known = self.by_pid.get(pid)
        if known is not None:
            return known
        if self.groups.started(rank, pid):
            self._new_group()
        attempt = self.groups.attempt
        name = rayplan.worker_pod_name(self.name, rank)
        now = time.time()
        pod = Pod(name=name, job=self.name, rank=rank, restart_attempt=attempt, phase=PodPhase.RUNNING,
                  node=socket.gethostname(), created=now, started=now, image=self.plan.image,
                  labels={LABEL_JOB: self.name, LABEL_RANK: str(rank), LABEL_RESTART_ATTEMPT: str(attempt),
                          LABEL_RAY_ROLE: "worker", **rayplan.kuberay_labels(self.job, "worker")})
        run = WorkerRun(pod, pid, PodLog(self.ctl.layout.pod_log(self.name, name), name, rank, self._on_lines))
        self.by_pid[pid] = self.group[rank] = self.runs[name] = run
        self.log_index.append([name, rank])
        self._publish_pod(pod, "ADDED")
        run.watch(self._worker_gone)
        expected = self.plan.num_workers or len(self.group)
        if len(self.group) >= expected and all(not r.finished.done() for r in self.group.values()):
            self._set_phase(JobPhase.RUNNING)
        self.persist()
        return run

    def _new_group(self) -> None:
        """Ray started a new worker group: the previous one's pods are finished and replaced."""
        attempt = self.groups.attempt
        for run in self.group.values():
            if run.killed:
                self._settle(run, PodPhase.FAILED, "Killed", _KILLED_EXIT_CODE)
            else:
                self._settle(run, PodPhase.FAILED, "Terminated")
            self.runs.pop(run.pod.name, None)
            self._publish_pod(run.pod, "DELETED")
        self.group = {}
        if attempt > 0:
            self.summary.restart_attempt = attempt
            driver = self.driver.pod
            # the driver drives every group: it is part of the current attempt
            driver.restart_attempt = attempt
            driver.labels[LABEL_RESTART_ATTEMPT] = str(attempt)
            self._publish_pod(driver)
            self._set_phase(JobPhase.RESTARTING, "Restarting",
                            f"Ray started a new worker group, restart attempt {attempt}")

    def _worker_gone(self, run: WorkerRun) -> None:
        if run.killed:
            self._settle(run, PodPhase.FAILED, "Killed", _KILLED_EXIT_CODE)
            if self.group.get(run.pod.rank) is run and not self.summary.phase.finished:
                self._set_phase(JobPhase.RESTARTING, "WorkerFailed",
                                f"pod {run.pod.name} was killed (exit code {_KILLED_EXIT_CODE})")
                self._group_failed()
        elif run.done:
            self._settle(run, PodPhase.SUCCEEDED, "Completed", 0)
        elif self.summary.phase == JobPhase.RESTARTING or self.group.get(run.pod.rank) is not run:
            self._settle(run, PodPhase.FAILED, "Terminated")  # Ray took its failed group down
        # else: settled by its event=done line, by the next group, or by the driver's end

    def _group_failed(self) -> None:
        """A worker of the current group failed: those already gone went down with it."""
        for run in self.group.values():
            if run.finished.done() and not run.done:
                self._settle(run, PodPhase.FAILED, "Terminated")

    def _settle(self, run: WorkerRun, phase: PodPhase, reason: str, exit_code: int | None = None) -> None:
        if run.settled:
            return
        run.settled = True
        pod = run.pod
        self._take_step(run)
        pod.phase, pod.reason, pod.exit_code, pod.finished = phase, reason, exit_code, time.time()
        self._dirty.discard(pod.name)
        self._publish_pod(pod)
        self.persist()


# ---------------------------------------------------------------- for the controller


def check(ctl, job: RayJob) -> rayplan.RayPlan:
    """The plan of a RayJob the embedded cluster can run, or InvalidResource in one line."""
    plan = rayplan.plan_rayjob(job)
    ray_temp_dir(ctl.layout.home)  # a state root too long for Ray's socket paths: refused now
    return plan


def new_runner(ctl, job: RayJob) -> RayJobRunner:
    """A RayJob about to run (InvalidResource in one line when the embedded cluster cannot run it)."""
    plan = check(ctl, job)
    return RayJobRunner(ctl, job, plan, _summary(plan))


def runner_from_status(ctl, job: RayJob, data: dict | None) -> RayJobRunner:
    """The RayJob as the previous controller left it; without a status it counts as lost too."""
    if data is None:
        plan = rayplan.plan_rayjob(job)
        runner = RayJobRunner(ctl, job, plan, _summary(plan))
        runner.lost = True
        return runner
    pods = [Pod.model_validate(p) for p in data["pods"]]
    return RayJobRunner(ctl, job, rayplan.RayPlan.from_json(data["plan"]),
                        JobSummary.model_validate(data["summary"]), pods, data.get("logs"))


def _summary(plan: rayplan.RayPlan) -> JobSummary:
    return JobSummary(
        name=plan.name, phase=JobPhase.CREATED, num_nodes=plan.num_workers, max_restarts=plan.max_failures,
        created=time.time(), volumes=[claim for claim, _ in plan.mounts], launcher="ray",
        conditions=[Condition(type="Created", status="True", reason="DriverCreated",
                              message="the driver pod is starting Ray")])
