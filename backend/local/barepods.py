"""Pods created through the API (`kubectl run`, a reader pod that mounts a volume): the kubelet
for one pod that no job owns.

One container, run as a process on this machine: the image is not pulled, its `command` (or,
without one, its `args`, as an image whose entrypoint execs them) runs with the pod's env (values
and ConfigMap/Secret refs), PVC, ConfigMap, Secret and emptyDir volumes at their mount paths (the
path rewritten where an argument or env value names it, as for job pods). The scheduler binds it
first. restartPolicy Never runs it once; OnFailure and Always restart it (restartCount + 1) after
a back-off that doubles from 10 s to 5 min, as the kubelet's CrashLoopBackOff does. Its status is
written to the API store as it changes; deleting it is SIGTERM, then SIGKILL after the grace.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from typing import TYPE_CHECKING, Any

from backend.errors import InvalidResource
from backend.local import pod_status, podspec
from backend.local import volumes as volumes_files
from backend.local.objects import rfc3339
from backend.local.podlogs import PodLog
from backend.processes import SpawnError, describe_exit, kill_group, spawn, sweep, wait_gone_async
from backend.local.scheduler import Requests

if TYPE_CHECKING:
    from backend.local.controller import Controller

LOG_DIR = "_pods"  # logs/_pods/<namespace>.<name>.log
_BACKOFF_START, _BACKOFF_MAX = 10.0, 300.0


def check_spec(pod: dict[str, Any]) -> list[tuple[str, str]]:
    """What the embedded kubelet cannot run, as (field, message) for a 422."""
    spec = pod.get("spec") or {}
    problems = []
    containers = spec.get("containers") or []
    if len(containers) != 1:
        problems.append(("spec.containers", f"Unsupported value: {len(containers)} containers: the embedded cluster "
                                            "runs pods of exactly one container"))
    elif not (containers[0].get("command") or containers[0].get("args")):
        problems.append(("spec.containers[0].command", "Required value: images are not pulled here, so the pod "
                                                       "needs a command (or args) to run on this machine"))
    for field in ("initContainers", "ephemeralContainers"):
        if spec.get(field):
            problems.append((f"spec.{field}", "Unsupported value: not run by the embedded cluster"))
    for i, volume in enumerate(spec.get("volumes") or []):
        if not any(k in volume for k in ("persistentVolumeClaim", "configMap", "secret", "emptyDir")):
            problems.append((f"spec.volumes[{i}]", "Unsupported value: the embedded cluster mounts "
                                                   "persistentVolumeClaim, configMap, secret and emptyDir volumes"))
    if spec.get("restartPolicy", "Always") not in ("Always", "OnFailure", "Never"):
        problems.append(("spec.restartPolicy", f"Unsupported value: {spec.get('restartPolicy')!r}"))
    return problems


class BarePod:
    def __init__(self, ctl: "Controller", pod: dict[str, Any]):
        self.ctl = ctl
        self.namespace, self.name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.spec = pod.get("spec") or {}
        self.container = (self.spec.get("containers") or [{}])[0]
        self.pid: int | None = None
        self.exit: asyncio.Future[int] | None = None
        self.deleting = False
        self.task: asyncio.Task | None = None
        self.restarts = 0
        self.deadline_exceeded = False

    @property
    def key(self) -> str:
        return f"{self.namespace}.{self.name}"

    @property
    def log_path(self):
        return self.ctl.layout.pod_log(LOG_DIR, self.key)

    def start(self) -> None:
        self.log_path.unlink(missing_ok=True)  # an earlier pod of this name: not this one's log
        self.task = asyncio.get_running_loop().create_task(self._life(), name=f"pod {self.key}")

    # ------------------------------------------------------------------ life

    async def _life(self) -> None:
        scheduler = self.ctl.scheduler
        requests = Requests.of((self.container.get("resources") or {}).get("requests"))
        claims = [v["persistentVolumeClaim"].get("claimName", "") for v in self.spec.get("volumes") or []
                  if "persistentVolumeClaim" in v]
        await self.ctl.wait_for_volumes(self.namespace, claims, self._unschedulable)
        await scheduler.bind(self.key, requests)
        deadline = self.spec.get("activeDeadlineSeconds")
        timer = asyncio.get_running_loop().call_later(float(deadline), self._deadline) if deadline else None
        try:
            argv, env, mounts = self._launch()
            backoff = _BACKOFF_START
            while not self.deleting:
                code, reason, started, finished = await self._run_once(argv, env)
                policy = self.spec.get("restartPolicy", "Always")
                if self.deadline_exceeded:
                    self._status("Failed", terminated=(code, reason, started, finished), reason="DeadlineExceeded")
                    return
                if self.deleting or policy == "Never" or (policy == "OnFailure" and code == 0):
                    self._status("Succeeded" if code == 0 else "Failed", terminated=(code, reason, started, finished))
                    return
                self.restarts += 1
                self._status("Running", waiting=("CrashLoopBackOff", f"back-off {backoff:g}s restarting failed "
                                                 f"container node (exit code {code})"),
                             last=(code, reason, started, finished))
                await asyncio.sleep(backoff)  # the kubelet's back-off: a timer, nothing waits on it
                backoff = min(backoff * 2, _BACKOFF_MAX)
        except InvalidResource as exc:  # what the pod needs is not there (a ConfigMap, a volume)
            self._status("Pending", waiting=("CreateContainerConfigError", str(exc)))
        finally:
            if timer is not None:
                timer.cancel()
            scheduler.release(self.key)
            shutil.rmtree(self.ctl.layout.root / "projected" / LOG_DIR / self.key, ignore_errors=True)

    def _launch(self) -> tuple[list[str], dict[str, str], dict[str, str]]:
        mounts = self._mounts()
        resolve = self.ctl.api.resolver(self.namespace)
        env = podspec.base_env()
        env.update(podspec.env_of(self.container, resolve))
        env = {k: podspec.rewrite_mounts(v, mounts) for k, v in env.items()}
        env.update({podspec.ENV_CLUSTER: str(self.ctl.layout.root), podspec.ENV_POD: self.name,
                    "HOSTNAME": self.name, "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                    "KUBERNETES_SERVICE_PORT": str(self.ctl.api.port)})
        argv = [podspec.rewrite_mounts(a, mounts)
                for a in (self.container.get("command") or []) + (self.container.get("args") or [])]
        return argv, env, mounts

    def _mounts(self) -> dict[str, str]:
        volumes = {v.get("name"): v for v in self.spec.get("volumes") or []}
        resolve = self.ctl.api.resolver(self.namespace)
        found = {}
        for mount in self.container.get("volumeMounts") or []:
            volume = volumes.get(mount.get("name"))
            if volume is None:
                raise InvalidResource(f"volumeMount {mount.get('name')!r}: no volume of that name")
            path = mount["mountPath"]
            if "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"].get("claimName", "")
                found[path] = str(self.ctl.layout.require_volume(claim))
                continue
            directory = self.ctl.layout.root / "projected" / LOG_DIR / self.key / volume["name"]
            source = podspec.projected_source(volume)
            data = {} if source is None else resolve(*source)  # emptyDir: an empty directory
            if data is None:
                raise InvalidResource(f"volume {volume['name']!r}: {source[0].lower()} {source[1]!r} not found")
            volumes_files.project(directory, data)
            found[path] = str(directory)
        return found

    async def _run_once(self, argv: list[str], env: dict[str, str]) -> tuple[int, str, float, float]:
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        log = PodLog(self.log_path, self.name, -1, self._on_lines)
        log.attach(read_fd)
        started = time.time()
        try:
            self.pid = spawn(argv, env, podspec.PROJECT_ROOT, write_fd, death_signal=signal.SIGTERM)
            self.exit = self.ctl.watch_exit(self.pid)
        except (SpawnError, OSError) as exc:
            log.note(f"kfcockpit: cannot start {argv[0]}: {exc}")
            os.close(write_fd)
            log.close()
            return 128, "StartError", started, time.time()
        os.close(write_fd)
        self._status("Running", running=started)
        status = await self.exit
        await wait_gone_async(sweep({podspec.ENV_CLUSTER: str(self.ctl.layout.root), podspec.ENV_POD: self.name}), 10)
        try:
            await asyncio.wait_for(asyncio.shield(log.closed), 5)
        except asyncio.TimeoutError:
            pass
        log.close()
        code, reason = describe_exit(status)
        return code, reason, started, time.time()

    def _deadline(self) -> None:
        """spec.activeDeadlineSeconds passed: the kubelet kills the pod, Failed/DeadlineExceeded."""
        self.deadline_exceeded = self.deleting = True
        if self.pid is not None and self.exit is not None and not self.exit.done():
            kill_group(self.pid, signal.SIGKILL)

    def _on_lines(self, podlog: PodLog, offset: int, lines: list) -> None:
        self.ctl.events.send("logs", LOG_DIR, {"pod": self.name})  # wakes `kubectl logs -f`

    # ------------------------------------------------------------------ status and deletion

    def _status(self, phase: str, running: float | None = None, waiting: tuple[str, str] | None = None,
                terminated: tuple[int, str, float, float] | None = None,
                last: tuple[int, str, float, float] | None = None, reason: str = "") -> None:
        state: dict[str, Any] = {}
        if running is not None:
            state = {"running": {"startedAt": rfc3339(running)}}
        elif waiting is not None:
            state = {"waiting": {"reason": waiting[0], "message": waiting[1]}}
        elif terminated is not None:
            state = {"terminated": _terminated(*terminated)}
        container = {"name": self.container.get("name", "node"), "image": self.container.get("image", ""),
                     "imageID": "", "containerID": f"process://{self.key}", "restartCount": self.restarts,
                     "ready": running is not None, "started": running is not None, "state": state}
        if last is not None:
            container["lastState"] = {"terminated": _terminated(*last)}
        pod_status.report(self.ctl.api, self.namespace, self.name, phase, container, reason)

    def _unschedulable(self, why: str) -> None:
        pod_status.unschedulable(self.ctl.api, self.namespace, self.name, why)

    def terminate(self, grace: float) -> None:
        self.deleting = True
        if self.pid is not None and self.exit is not None and not self.exit.done():
            kill_group(self.pid, signal.SIGTERM)
            timer = asyncio.get_running_loop().call_later(grace, kill_group, self.pid, signal.SIGKILL)
            self.exit.add_done_callback(lambda _f: timer.cancel())
        elif self.task is not None:
            self.task.cancel()

    def running(self) -> bool:
        return self.task is not None and not self.task.done()


def _terminated(code: int, reason: str, started: float, finished: float) -> dict[str, Any]:
    return {"exitCode": code, "reason": "Completed" if code == 0 else reason if reason == "StartError" else "Error",
            "startedAt": rfc3339(started), "finishedAt": rfc3339(finished)}
