"""A Ray driver pod's workers, shown as pods of its node: what KubeRay's worker pods are on a
cluster, found here in the driver's own output.

The driver (a pod labelled `kfcockpit.io/ray-role: driver`) starts its own Ray on 127.0.0.1,
with its files under the state root (RAY_TMPDIR), and Ray forwards every worker's output through
it, each line prefixed with the pid that printed it (LOG_FORMAT_ENV keeps that prefix plain). The
node reads the driver's pipe and hands each line to the log of the pod it belongs to (`route`). A
worker becomes a pod `<job>-worker-<rank>-<5 chars>` when its `event=start rank=R pid=P` line
arrives, labelled as the driver's annotation says, owned by the driver's owner, bound to this
node and Running; its process is Ray's child, not ours, so it is watched through a pidfd.
Deleting a worker pod SIGKILLs that process (what `kill_pod` does).

Ray, not the cluster, restarts a failed group (FailureConfig): the new group's start lines make
new worker pods with restart attempt + 1, the previous group's pods end Failed (reason Error;
Killed, or Terminated with their group) and are deleted, and the driver's restart-attempt label
follows. A worker's exit is only a failure if nothing says otherwise: Ray forwards lines a little
after they are printed, so a worker that printed `event=done` may be seen exiting before that line
arrives; such an exit stays open until the line comes, the group is replaced, or the driver ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from backend.local.node.logs import PodLog, log_path
from backend.local.registry.strategies.rayjobs import worker_pod_prefix
from backend.models import LABEL_JOB, LABEL_RANK, LABEL_RESTART_ATTEMPT
from backend.raytrain.groups import WorkerGroups
from training.logfmt import parse_line

if TYPE_CHECKING:
    from backend.local.node.container import Container

ROLE = "kfcockpit.io/ray-role"
WORKERS_ANNOTATION = "kfcockpit.io/ray-workers"
WORKER_LABELS_ANNOTATION = "kfcockpit.io/ray-worker-labels"
DRIVER_ANNOTATION = "kfcockpit.io/ray-driver"  # on a worker pod: the uid of the driver pod it came from
WORKER_CONTAINER = "ray-worker"
# How the node reads a driver's output: each forwarded worker line prefixed with the pid that
# printed it, `(RayTrainWorker pid=42) step=3 ...`, without colour, every line kept.
LOG_FORMAT_ENV = {"RAY_DISABLE_WORKER_LOG_PREFIX": "0", "RAY_COLOR_PREFIX": "0", "RAY_DEDUP_LOGS": "0"}
# `(RayTrainWorker pid=4242) text` or `(pid=4242, ip=10.0.0.2) text`: who printed a forwarded line
_PREFIX = re.compile(rb"^\((?:[^()]*? )?pid=(\d+)(?:, ip=[^)]*)?\) ")
_ERROR_LINE = re.compile(rb"^[\w.-]+: error: ")
_KILLED_EXIT_CODE = 128 + signal.SIGKILL

Obj = dict


def split_prefix(raw: bytes) -> tuple[int | None, bytes]:
    """(pid of the Ray process that printed it, the line as printed) of one driver output line."""
    match = _PREFIX.match(raw)
    if match is None:
        return None, raw
    return int(match.group(1)), raw[match.end():]


def _time(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class RayWorker:
    """A Ray Train worker shown as a pod, its process watched through a pidfd."""

    def __init__(self, pod: Obj, rank: int, attempt: int, pid: int, log: PodLog):
        self.pod, self.rank, self.attempt, self.pid, self.log = pod, rank, attempt, pid, log
        self.started = time.time()
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # process gone
        self.killed = False
        self.done = False  # printed event=done
        self.settled = False  # its final phase is reported
        self._fd: int | None = None

    @property
    def uid(self) -> str:
        return self.pod["metadata"]["uid"]

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

    def kill(self) -> None:
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


class RayDriver:
    """The workers of one driver pod running on `kubelet`'s node."""

    def __init__(self, kubelet, driver: Obj, log_root: Path):
        self.kubelet, self.driver, self.log_root = kubelet, driver, log_root
        meta = driver["metadata"]
        annotations = meta.get("annotations") or {}
        self.job = (meta.get("labels") or {}).get(LABEL_JOB, meta["name"])
        self.expected = int(annotations.get(WORKERS_ANNOTATION) or 0)
        self.worker_labels = json.loads(annotations.get(WORKER_LABELS_ANNOTATION) or "{}")
        self.by_pid: dict[int, RayWorker] = {}  # every worker this driver started
        self.by_uid: dict[str, RayWorker] = {}
        self.group: dict[int, RayWorker] = {}  # rank -> worker of the current group
        self.groups = WorkerGroups()
        self.run: Container | None = None  # the driver's container run, once started

    # ------------------------------------------------------------------ the driver's output

    def route(self, raw_lines: list[bytes]) -> None:
        """Hand each line of the driver's output to the log of the pod that printed it."""
        batches: dict[PodLog, list[bytes]] = {}
        for raw in raw_lines:
            pid, text = split_prefix(raw)
            worker = self._worker_of(pid, text)
            if worker is not None:
                batches.setdefault(worker.log, []).append(text)
            elif self.run is not None:
                batches.setdefault(self.run.log, []).append(raw)
                self._note_failure(raw)
        for target, lines in batches.items():
            target.write(lines)

    def _note_failure(self, raw: bytes) -> None:
        """What the driver says when it gives up becomes its container's termination message."""
        if b"event=failed" in raw:
            reason = parse_line(raw.decode(errors="replace")).get("reason", "")
            if reason:
                self.run.note = reason
        elif _ERROR_LINE.match(raw):  # `prog: error: ...`, how a refused command line says why
            self.run.note = raw.decode(errors="replace").strip()

    def _worker_of(self, pid: int | None, text: bytes) -> RayWorker | None:
        if pid is not None and b"event=" not in text:  # a step line: its prefix says whose (no parse)
            return self.by_pid.get(pid)
        fields = parse_line(text.decode(errors="replace")) if b"=" in text else {}
        event = fields.get("event")
        if event == "start" and "rank" in fields and "pid" in fields:
            try:
                return self._started(int(fields["rank"]), int(fields["pid"]))
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
                self._settle(worker, "Succeeded", "Completed", 0)
        return worker

    # ------------------------------------------------------------------ worker pods

    def _started(self, rank: int, pid: int) -> RayWorker:
        known = self.by_pid.get(pid)
        if known is not None:
            return known
        if self.groups.started(rank, pid):
            self._new_group()
        attempt = self.groups.attempt
        meta = self.driver["metadata"]
        pod = self.kubelet.client.create("Pod", {
            "metadata": {"generateName": worker_pod_prefix(self.job, rank), "namespace": meta["namespace"],
                         "labels": {**self.worker_labels, LABEL_RANK: str(rank), LABEL_RESTART_ATTEMPT: str(attempt)},
                         "annotations": {DRIVER_ANNOTATION: meta["uid"]},
                         "ownerReferences": meta.get("ownerReferences") or []},
            "spec": {"nodeName": self.kubelet.name, "restartPolicy": "Never", "schedulerName": "ray",
                     "containers": [{"name": WORKER_CONTAINER, "image": self.driver["spec"]["containers"][0].get(
                         "image", ""), "command": ["ray-worker", f"--rank={rank}"]}]}})
        log = PodLog(log_path(self.log_root, meta["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"],
                              WORKER_CONTAINER, 0))
        run = RayWorker(pod, rank, attempt, pid, log)
        self.by_pid[pid] = self.group[rank] = self.by_uid[run.uid] = run
        self._report(run, "Running", {"running": {"startedAt": _time(run.started)}})
        run.watch(self._gone)
        return run

    def _new_group(self) -> None:
        """Ray started a new worker group: the previous one's pods are finished and replaced."""
        for run in self.group.values():
            self._settle(run, "Failed", "Killed" if run.killed else "Terminated",
                         _KILLED_EXIT_CODE if run.killed else None)
            meta = run.pod["metadata"]
            self.kubelet.client.delete("Pod", meta["namespace"], meta["name"], grace=0, uid=meta["uid"])
        self.group = {}
        attempt = self.groups.attempt
        if attempt > 0:  # the driver drives every group: it is part of the current attempt
            def label(live: Obj) -> None:
                live["metadata"]["labels"][LABEL_RESTART_ATTEMPT] = str(attempt)
            meta = self.driver["metadata"]
            self.kubelet.client.mutate("Pod", meta["namespace"], meta["name"], label)

    def _gone(self, run: RayWorker) -> None:
        if run.killed:
            self._settle(run, "Failed", "Killed", _KILLED_EXIT_CODE)
            if self.group.get(run.rank) is run:  # those already gone went down with it
                for other in self.group.values():
                    if other.finished.done() and not other.done:
                        self._settle(other, "Failed", "Terminated")
        elif run.done:
            self._settle(run, "Succeeded", "Completed", 0)
        elif self.group.get(run.rank) is not run:
            self._settle(run, "Failed", "Terminated")  # Ray took its failed group down
        # else: settled by its event=done line, by the next group, or by the driver's end

    def _settle(self, run: RayWorker, phase: str, why: str, code: int | None = None) -> None:
        if run.settled:
            return
        run.settled = True
        state = {"exitCode": code if code is not None else 1,
                 "reason": "Completed" if phase == "Succeeded" else "Error",
                 "startedAt": _time(run.started), "finishedAt": _time(time.time())}
        if phase != "Succeeded":
            state["message"] = why
        self._report(run, phase, {"terminated": state})

    def _report(self, run: RayWorker, phase: str, state: Obj) -> None:
        running = "running" in state
        self.kubelet.report(run.pod, {
            "phase": phase, "conditions": [("Initialized", "True"), ("ContainersReady", str(running)),
                                           ("Ready", str(running)), ("PodReadyToStartContainers", "True")],
            "containerStatuses": [{"name": WORKER_CONTAINER, "image": "", "imageID": "", "restartCount": 0,
                                   "ready": running, "started": running, "state": state,
                                   "containerID": f"process://{run.pid}"}]})

    # ------------------------------------------------------------------ what the kubelet tells it

    def worker_deleted(self, uid: str) -> None:
        """A worker's pod is deleted (kill_pod: grace 0): its process goes at once."""
        run = self.by_uid.get(uid)
        if run is not None and not run.finished.done():
            run.kill()

    def driver_ended(self, succeeded: bool) -> None:
        """The driver's run is over (its Ray processes gone, its output drained): so are the workers."""
        for run in self.by_pid.values():
            if not run.settled:
                final = run.done or (succeeded and self.group.get(run.rank) is run)
                self._settle(run, "Succeeded" if final else "Failed", "Completed" if final else "Terminated",
                             0 if final else None)
            run.close()

    def worker(self, uid: str) -> RayWorker | None:
        return self.by_uid.get(uid)
