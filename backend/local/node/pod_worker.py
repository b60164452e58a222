"""The life of one pod on its node, as the kubelet's pod worker lives it: prepare, run its
container, restart it as its restartPolicy says, end it, and report each step as the pod's
status.

- Prepare: the volumes' directories (a claim's, or a ConfigMap's, Secret's or emptyDir's files
  written for this pod), the environment with its references resolved and the rendezvous
  address resolved by the node's network; what is missing (a ConfigMap, a key) leaves the
  container waiting in CreateContainerConfigError until it appears.
- Run: Running and Ready while the process runs; on exit, terminated with its exit code and
  reason (Completed, Error, OOMKilled when the kernel ended it at its memory limit; with
  FallbackToLogsOnError its last lines as the message; a pod that reached its pids limit says so).
- restartPolicy: Never ends the pod with its container (Succeeded on 0, else Failed); OnFailure
  restarts a failed one, Always any; the first restart at once, then after a back-off that
  doubles from 10 s to 5 min (CrashLoopBackOff), restartCount counting them.
- activeDeadlineSeconds: the pod is killed and Failed (DeadlineExceeded) once it has run so long.
- Deletion (a deletionTimestamp): SIGTERM now, SIGKILL when its grace period has passed; once the
  container has ended, the kubelet's last word, a delete with grace 0, lets the pod go.
- Failures: a pod the kubelet fails to prepare, start or run (ENOSPC writing its files, a bug)
  ends Failed (exit 128), a failure its owner's policy counts (backoffLimit, maxRestarts). A
  status the API refuses (a full disk) is sent again until taken, the latest one only, as the
  status manager resends; the process runs on meanwhile.
- Freezing (this project's, no upstream kubelet has it): while the pod carries FREEZE_ANNOTATION
  "true", every process of its running container is stopped (SIGSTOP), as a frozen node or a
  stuck kernel leaves a rank: Running, silent, its peers blocked on it; `kfcockpit pod freeze`.
- Slowing (this project's too): while the pod carries SLOW_ANNOTATION with a factor under 1, its
  running container computes at that factor of its speed (throttle.py), a straggler its peers
  wait for; `kfcockpit pod slow`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any, Protocol

from backend.errors import InvalidResource
from backend.local.node import podspec
from backend.local.node.container import LOST_NOTE, START_ERROR_STATUS, Container
from backend.local.node.logs import FollowedLog, PodLog
from backend.local.node.throttle import Throttle
from backend.local.registry.status import ApiError
from backend.models import FREEZE_ANNOTATION, SLOW_ANNOTATION
from backend.processes import describe_exit

log = logging.getLogger("kfcockpit.kubelet")

Obj = dict[str, Any]
_BACKOFF_START, _BACKOFF_MAX = 10.0, 300.0
_REPORT_RETRY_START, _REPORT_RETRY_MAX = 1.0, 30.0
_DEADLINE = ("DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
_Ending = tuple[str, Obj, "tuple[str, str] | None"]  # the pod's last phase, container state, reason


def frozen_by(pod: Obj) -> bool:
    """Whether the pod asks for its processes to be stopped."""
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(FREEZE_ANNOTATION) == "true"


def slowed_by(pod: Obj) -> float:
    """The factor of its speed the pod asks its processes to run at (1: unslowed)."""
    try:
        factor = float(((pod.get("metadata") or {}).get("annotations") or {}).get(SLOW_ANNOTATION, "1"))
    except ValueError:
        return 1.0
    return factor if 0 < factor < 1 else 1.0


class Node(Protocol):
    """What a pod worker uses of its kubelet (kubelet.py)."""

    name: str
    cluster_id: str

    def prepare(self, pod: Obj, container: Obj) -> tuple[podspec.LaunchSpec, tuple[str, ...]]: ...

    async def start(self, pod: Obj, run: Container, spec: podspec.LaunchSpec, cgroups: tuple[str, ...]) -> None: ...

    def ended(self, pod: Obj, run: Container, code: int) -> None: ...

    def open_log(self, pod: Obj, container: str, restart: int) -> PodLog | FollowedLog: ...

    def adopt(self, pod: Obj, container: str, restart: int) -> tuple[Container, int] | None: ...

    def report(self, pod: Obj, status: Obj, labels: dict[str, str] | None = None) -> None: ...

    def record(self, pod: Obj, event_type: str, reason: str, message: str) -> None: ...

    def limit_reached(self, pod: Obj) -> str: ...

    def oom_killed(self, pod: Obj) -> bool: ...

    def finished(self, worker: "PodWorker") -> None: ...


def _time(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class PodWorker:
    def __init__(self, node: Node, pod: Obj):
        self.node, self.pod = node, pod
        meta = pod["metadata"]
        self.uid, self.namespace, self.name = meta["uid"], meta["namespace"], meta["name"]
        self.container_spec = (pod["spec"].get("containers") or [{}])[0]
        self.run: Container | None = None
        self.restarts = 0
        self.deleting = False
        self.wake = asyncio.Event()  # termination, or a change of what the pod refers to
        self.task: asyncio.Task | None = None
        self._kill_timer: asyncio.TimerHandle | None = None
        self._deadline_hit = False
        self.frozen = False  # its running container's processes are stopped (FREEZE_ANNOTATION)
        self.throttle: Throttle | None = None  # its running container slowed (SLOW_ANNOTATION)
        self._lost: Obj | None = None  # the run its node's previous kubelet left, if any
        self._unsent: tuple[Obj, dict[str, str] | None] | None = None  # a status the API refused
        self._resend: asyncio.TimerHandle | None = None

    def recover(self, ran: bool) -> None:
        """The pod may have run under the node's previous kubelet (`ran`: it said so): its run is
        adopted (followed on while its shim lives, or ended as its shim recorded); a run that
        left nothing died with that kubelet (exit 137). The restart policy decides what follows
        its end."""
        statuses = (self.pod.get("status") or {}).get("containerStatuses") or [{}]
        self.restarts = int(statuses[0].get("restartCount") or 0)
        adopted = self.node.adopt(self.pod, self.container_spec.get("name", ""), self.restarts)
        if adopted is not None:
            reported, (self.run, self.restarts) = self.restarts, adopted
            if self.restarts != reported and not self.run.exit.done():  # started, never reported: say so
                was = statuses[0].get("state") or {}
                self._report("Running", {"running": {"startedAt": _time(self.run.started)}},
                             was if "terminated" in was else statuses[0].get("lastState"))
        elif ran:
            self._lost = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": _time(time.time()),
                                         "message": LOST_NOTE}}

    @property
    def key(self) -> str:
        return self.uid

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._life(), name=f"pod {self.namespace}/{self.name}")

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    # ------------------------------------------------------------------ signals from the kubelet

    def terminate(self, grace: float) -> None:
        """The pod is being deleted: SIGTERM now, SIGKILL after `grace` seconds."""
        first = not self.deleting
        self.deleting = True
        self.wake.set()
        run = self.run
        if run is None or run.exit.done():
            return
        if first:
            self.node.record(self.pod, "Normal", "Killing", f"Stopping container {self.container_spec.get('name')}")
            self.slow(1.0)
        if grace <= 0:
            # A kill (the cockpit's, `kubectl delete --grace-period=0 --force`): SIGKILL alone. A
            # SIGTERM sent just before it would let the process begin its exit save, claim the
            # step and die holding the claim, which keeps its surviving peer from saving it.
            # Upstream's kubelet gives even a forced deletion 2 s of grace
            # (kuberuntime_container.go, minimumGracePeriodInSeconds); here 0 means a crash.
            run.kill()
            return
        if first:
            run.terminate()
            if self.frozen:  # a stopped process keeps SIGTERM pending: let it act on it
                self.frozen = False
                run.signal_all(signal.SIGCONT)
        if self._kill_timer is None or self._kill_timer.when() > asyncio.get_running_loop().time() + grace:
            if self._kill_timer is not None:
                self._kill_timer.cancel()
            self._kill_timer = asyncio.get_running_loop().call_later(grace, run.kill)

    def freeze(self, frozen: bool) -> None:
        """Stop (SIGSTOP) or continue (SIGCONT) every process of the running container, as the
        pod's FREEZE_ANNOTATION asks: a frozen node or a stuck kernel to practise on (its pod stays
        Running, its peers wait in their collective). Said once per change, as an event."""
        run = self.run
        if frozen == self.frozen or run is None or run.exit.done():
            return
        self.frozen = frozen
        run.signal_all(signal.SIGSTOP if frozen else signal.SIGCONT)
        name = self.container_spec.get("name")
        self.node.record(self.pod, "Warning" if frozen else "Normal", "Frozen" if frozen else "Thawed",
                         f"Every process of container {name} {'stopped' if frozen else 'continued'} "
                         f"(annotation {FREEZE_ANNOTATION})")

    def slow(self, factor: float) -> None:
        """Run the container's processes at `factor` of their speed (1: at full speed again), as
        the pod's SLOW_ANNOTATION asks: a straggler to practise on. Said once per change."""
        run = self.run
        now = self.throttle.factor if self.throttle is not None else 1.0
        if factor == now or run is None or run.exit.done() or (factor < 1 and self.deleting):
            return
        if self.throttle is not None:
            self.throttle.stop()
            self.throttle = None
        if factor < 1:
            self.throttle = Throttle(factor, run.processes, lambda: self.frozen)
            self.throttle.start()
        name = self.container_spec.get("name")
        self.node.record(self.pod, "Warning" if factor < 1 else "Normal", "Slowed" if factor < 1 else "Unslowed",
                         f"Every process of container {name} computes at {factor:g}x its speed "
                         f"(annotation {SLOW_ANNOTATION})")

    def kill(self) -> None:
        """The pod is gone from the API: its processes go now, nothing more is reported."""
        self.deleting = True
        self.wake.set()
        self.slow(1.0)
        if self.run is not None:
            self.run.kill()

    def pid(self) -> int | None:
        run = self.run
        return run.pid if run is not None and not run.exit.done() else None

    # ------------------------------------------------------------------ life

    async def _life(self) -> None:
        deadline = self.pod["spec"].get("activeDeadlineSeconds")
        timer = asyncio.get_running_loop().call_later(float(deadline), self._deadline) if deadline else None
        try:
            try:
                ending = await self._run()
            except Exception as exc:  # noqa: BLE001 - a failure must not leave the pod's processes running
                if isinstance(exc, (ApiError, OSError)):  # the disk or the API refused a write: said there
                    log.error("pod %s/%s: failed starting or running it: %s", self.namespace, self.name, exc)
                else:
                    log.exception("pod %s/%s: kubelet error", self.namespace, self.name)
                if self.run is not None:
                    self.run.kill()
                # a pod failure, counted by its owner's policy (backoffLimit, maxRestarts)
                ending = "Failed", {"terminated": {"exitCode": 128, "reason": "Error", "message": "the embedded "
                                                   "kubelet failed running it (see controller.log)"}}, None
            # reported until the API takes it, as the kubelet's status manager retries its updates
            await self._report_until_taken(*ending)
        finally:
            if timer is not None:
                timer.cancel()
            for timer_handle in (self._kill_timer, self._resend):
                if timer_handle is not None:
                    timer_handle.cancel()
            try:
                self.node.finished(self)
            except ApiError as exc:  # its last word refused (a full disk): the pod stays Terminating
                log.error("pod %s/%s: not removed: %s", self.namespace, self.name, exc.message)

    async def _run(self) -> _Ending:
        backoff, last, adopted = None, self._lost, self.run
        if last is not None:
            policy = self.pod["spec"].get("restartPolicy", "Always")
            if policy == "Never":
                return self._end(last)
            self.restarts += 1
            backoff = _BACKOFF_START
        while not self.deleting or adopted is not None:
            if adopted is not None:  # the run the previous kubelet left, frozen and slowed as the pod now says
                run, adopted = adopted, None
                self.frozen = frozen_by(self.pod)
                run.signal_all(signal.SIGSTOP if self.frozen else signal.SIGCONT)
                self.slow(slowed_by(self.pod))
            else:
                run = await self._start(last)
                if run is None:  # waiting for what it refers to
                    continue
            status = await run.ended()
            if self.throttle is not None:  # that run's processes are gone
                self.throttle.stop()
                self.throttle = None
            last = {"terminated": self._terminated(run, status)}
            code = last["terminated"]["exitCode"]
            self.node.ended(self.pod, run, code)
            policy = self.pod["spec"].get("restartPolicy", "Always")
            if self.deleting or policy == "Never" or (policy == "OnFailure" and code == 0):
                break
            # restart: the first at once, then after the back-off (CrashLoopBackOff)
            if backoff is not None:
                name = self.container_spec.get("name")
                message = f"back-off {backoff:g}s restarting failed container={name} pod={self.name}_{self.namespace}" \
                          f"({self.uid})"
                self._report("Running", {"waiting": {"reason": "CrashLoopBackOff", "message": message}}, last)
                self.node.record(self.pod, "Warning", "BackOff", f"Back-off restarting failed container {name} in "
                                                                 f"pod {self.name}_{self.namespace}({self.uid})")
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), backoff)
                except asyncio.TimeoutError:
                    pass
                if self.deleting:
                    break
            backoff = _BACKOFF_START if backoff is None else min(backoff * 2, _BACKOFF_MAX)
            self.restarts += 1
        return self._end(last)

    async def _start(self, last: Obj | None) -> Container | None:
        """Prepare and start a run of the container; None when what it refers to is missing
        (CreateContainerConfigError), after waiting for a change."""
        try:
            spec, cgroups = self.node.prepare(self.pod, self.container_spec)
        except InvalidResource as exc:
            self._report("Pending", {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}})
            self.node.record(self.pod, "Warning", "Failed", f"Error: {exc}")
            self.wake.clear()
            await self.wake.wait()
            return None
        run = self.run = Container(self.key, self.node.cluster_id,
                                   self.node.open_log(self.pod, self.container_spec.get("name", ""), self.restarts))
        await self.node.start(self.pod, run, spec, cgroups)
        self.frozen = False
        self.freeze(frozen_by(self.pod))  # annotated before it started (or restarted)
        self.slow(slowed_by(self.pod))
        if self.deleting:  # deleted while it was starting
            run.kill()
        if run.start_error:
            self.node.record(self.pod, "Warning", "Failed", f"Error: {run.start_error}")
        else:
            self._report("Running", {"running": {"startedAt": _time(run.started)}}, last,
                         labels={"kfcockpit.io/launch": "warm" if run.warm else "exec"})
            name = self.container_spec.get("name")
            self.node.record(self.pod, "Normal", "Created", f"Created container {name}")
            self.node.record(self.pod, "Normal", "Started", f"Started container {name} (a process on this "
                                                             "machine)")
        return run

    def _terminated(self, run: Container, status: int) -> Obj:
        code, _why = (127, "StartError") if status == START_ERROR_STATUS and run.start_error else describe_exit(status)
        oom = code != 0 and self.node.oom_killed(self.pod)  # the kernel ended it at its memory limit
        if oom:  # the kernel kills the container's whole cgroup (memory.oom.group, the kubelet's
            code = 128 + signal.SIGKILL  # default): SIGKILL, 137, whatever its main process did
        state: Obj = {"exitCode": code, "reason": "Completed" if code == 0 else
                      "StartError" if run.start_error else "OOMKilled" if oom else "Error",
                      "startedAt": _time(run.started), "finishedAt": _time(time.time()),
                      "containerID": f"process://{run.pid or 0}"}
        if code > 128 and code - 128 in (signal.SIGKILL, signal.SIGTERM):
            state["signal"] = code - 128
        message = run.start_error or self.node.limit_reached(self.pod) or ("" if oom else run.note)
        if not message and code != 0 and self.container_spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = "\n".join(run.log.last_lines)
        if message:
            state["message"] = message
        return state

    def _end(self, last: Obj | None) -> _Ending:
        if last is None:  # deleted before its container ever ran
            last = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                   "message": "The container could not be located when the pod was terminated"}}
        if self._deadline_hit:
            return "Failed", last, _DEADLINE
        return "Succeeded" if last["terminated"]["exitCode"] == 0 else "Failed", last, None

    def _deadline(self) -> None:
        """spec.activeDeadlineSeconds has passed: the kubelet kills the pod, Failed."""
        self._deadline_hit = self.deleting = True
        self.wake.set()
        if self.run is not None:
            self.run.kill()

    # ------------------------------------------------------------------ status

    async def _report_until_taken(self, phase: str, last: Obj, reason: tuple[str, str] | None) -> None:
        """The pod's last status, sent until the API takes it (or the pod goes)."""
        self._unsent = None
        if self._resend is not None:
            self._resend.cancel()
        wait = _REPORT_RETRY_START
        while True:
            try:
                self.node.report(self.pod, self._status(phase, last, reason=reason))
                return
            except (ApiError, OSError) as exc:
                log.info("pod %s/%s: status not taken (%s); retrying in %gs", self.namespace, self.name, exc, wait)
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), wait)
            except asyncio.TimeoutError:
                pass
            if self.deleting:  # gone from the API, or being deleted: its status no longer matters
                return
            wait = min(wait * 2, _REPORT_RETRY_MAX)

    def _report(self, phase: str, state: Obj, last: Obj | None = None, reason: tuple[str, str] | None = None,
                labels: dict[str, str] | None = None) -> None:
        """A status along the pod's life. One the API refuses (a full disk) leaves the pod as it
        is running, logged, and is sent again after a while unless a newer one was taken, as the
        kubelet's status manager resends the latest status."""
        self._unsent = (self._status(phase, state, last, reason), labels)
        self._send_unsent()

    def _send_unsent(self) -> None:
        if self._resend is not None:
            self._resend.cancel()
            self._resend = None
        if self._unsent is None:
            return
        try:
            self.node.report(self.pod, *self._unsent)
        except ApiError as exc:
            log.warning("pod %s/%s: status not taken (%s); sending it again in %gs", self.namespace, self.name,
                        exc.message, _REPORT_RETRY_START)
            self._resend = asyncio.get_running_loop().call_later(_REPORT_RETRY_START, self._send_unsent)
            return
        self._unsent = None

    def _status(self, phase: str, state: Obj, last: Obj | None = None, reason: tuple[str, str] | None = None) -> Obj:
        running = "running" in state
        container = {"name": self.container_spec.get("name", ""), "image": self.container_spec.get("image", ""),
                     "imageID": "", "restartCount": self.restarts, "ready": running, "started": running,
                     "state": state}
        if self.run is not None and self.run.pid:
            container["containerID"] = f"process://{self.run.pid}"
        if last is not None:
            container["lastState"] = last
        status: Obj = {"phase": phase, "containerStatuses": [container],
                       "conditions": [("Initialized", "True"), ("ContainersReady", str(running)),
                                      ("Ready", str(running)), ("PodReadyToStartContainers", "True")]}
        if reason is not None:
            status["reason"], status["message"] = reason
        return status
