"""A container's shim, as containerd-shim is to containerd: the parent of one run's process, which
outlives the kubelet (and the controller process that holds it), so a control-plane crash ends
no pod and the next kubelet adopts the run.

    python -m backend.local.node.shim --fd N    (a cold run's, started by the kubelet: container.py)
    or forked by the warm-worker zygote (zygote.py), which then forks the worker from it

No death signal ties it to its starter; its worker's ties the worker to it (a shim killed takes
its run along). It:
- holds the run's output pipe and appends each line, stamped, to the run's log file (logs.py's
  format: `<epoch seconds> <text>`), reading at most once per READ_INTERVAL (a fast worker
  prints hundreds of lines a second: one write per batch, not per line);
- is a subreaper, so what the worker starts stays below it; when the worker exits it kills what
  is left of the pod (its marker), drains the pipe, then records the wait status in `.exit`
  beside the log, and exits: the status comes after the run's last line;
- where the pod has a PID namespace of its own (pidns.py), starts its PID 1 (a pause) before
  the worker, which is then its PID 2 and still the shim's child; the pause reaps the
  namespace's orphans, and its SIGKILL at the worker's exit ends whatever is left inside;
- records itself in `.shim` beside the log (its pid and start time, the worker's pid, the run's
  start, its GPUs), from which a new kubelet adopts the run (`find`), the start time checked
  against /proc so that a reused pid is not taken for it.

The kubelet follows the log file (logs.FollowedLog) and learns the end from a pidfd on the shim
and the `.exit` file (container.py). Imports nothing heavy: a cold run starts it fresh.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import time
from pathlib import Path
from typing import Callable

from backend.local.node import confine, pidns
from backend.processes import (SpawnError, become_subreaper, kill_group, reap_exited, spawn, start_time, sweep,
                               wait_gone)
from training.atomic import write_atomic

READ_INTERVAL = 0.02
_DRAIN_SECONDS = 5.0  # after the worker's exit, how long the pipe may stay open (held by a straggler)
_SWEPT_GONE_SECONDS = 10.0  # how long SIGKILLed leftovers may take to be gone
LOST_STATUS = signal.SIGKILL  # the wait status of a run whose shim went without recording one
MAX_REQUEST = 1 << 20

# (the pipe's write end, fds the worker must close) -> the worker's pid; SpawnError if it cannot start
StartWorker = Callable[[int, list[int]], int]


class LogFile:
    """A container run's log file, appended to in whole lines stamped with the time they came
    (`<epoch seconds> <text>`). A write the disk refuses (full) drops its lines, the container
    running on, as containerd's CRI log writer drops what it cannot write; nothing half-written
    is read as a line, and the next write that holds first says how many were lost and why."""

    def __init__(self, path: Path, warn: Callable[[str], None]):
        """`warn`: told once per time the disk refuses, where the node says so."""
        self.path, self._warn = path, warn
        self.file = open(path, "ab", buffering=0)
        self.size = self.file.tell()
        self.lost, self.lost_why = 0, ""  # lines the disk refused since the last write that held

    def write(self, raw_lines: list[bytes]) -> bool:
        """Append whole lines (without their newline); whether the disk took them."""
        stamp = f"{time.time():.6f} ".encode()
        data = b"".join(stamp + line.rstrip(b"\r") + b"\n" for line in raw_lines)
        if self.lost:  # lines the disk refused before: said where they were, once space is back
            data = stamp + f"kfcockpit: {self.lost} lines of this log lost: {self.lost_why}\n".encode() + data
        try:
            self.file.write(data)
        except OSError as exc:  # a full disk: the container runs on, its lines are dropped and counted
            if not self.lost:
                self._warn(f"log {self.path}: {exc.strerror or exc}; lines are dropped until there is space")
            self.lost += len(raw_lines)
            self.lost_why = exc.strerror or str(exc)
            try:
                self.file.seek(self.size)  # nothing of a part-written chunk is read as lines
                self.file.truncate()
            except OSError:
                pass
            return False
        self.lost = 0
        self.size = self.file.tell()
        return True

    def close(self) -> None:
        self.file.close()


def record_path(log: Path) -> Path:
    return log.with_suffix(".shim")


def status_path(log: Path) -> Path:
    return log.with_suffix(".exit")


def recorded_status(log: Path) -> int | None:
    """The wait status the run's shim recorded, None if none did."""
    try:
        return int(status_path(log).read_text())
    except (OSError, ValueError):
        return None


def live_record(log: Path) -> dict | None:
    """The record of the run's shim, if that shim is alive (its pid started when it says)."""
    try:
        record = json.loads(record_path(log).read_text())
    except (OSError, ValueError):
        return None
    return record if start_time(record["shim"]) == record["start"] else None


def live_runs(logs: Path) -> list[dict]:
    """The records of every live shim under a kubelet's logs directory."""
    return [r for path in logs.glob("*/*/*/*.shim") if (r := live_record(path.with_suffix(".log")))]


def kill_run(record: dict) -> None:
    """End a live run (its shim then sweeps what is left of it, records the status and exits)."""
    kill_group(record["pid"])


# ---------------------------------------------------------------------- the shim process

def become(request: dict, report_fd: int, start_worker: StartWorker) -> None:
    """In a fresh process (exec'd, or forked by the zygote): be the shim of the run `request`
    describes ({"log", "marker": the pod's, "devices", ...}), start its worker, tell the starter on
    `report_fd` (the record, or {"error"}), serve the run to its end. Never returns."""
    try:
        os.setsid()  # a session of its own: the zygote's or the kubelet's kill never reaches it
    except PermissionError:
        pass  # exec'd by processes.spawn, it is a session leader already
    become_subreaper()
    log = Path(request["log"])
    os.set_inheritable(report_fd, False)  # the starter's alone: held by nothing else the shim starts
    pause, held = None, []
    if (request.get("confine") or {}).get("pid_namespace"):
        try:
            pidns.enter()
            pause, fd = pidns.start_pause()
            held = [fd] if fd is not None else []
        except OSError as exc:
            _report(report_fd, {"error": f"cannot give the pod a PID namespace: {exc}"})
            os._exit(0)
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        worker = start_worker(write_fd, [read_fd, report_fd, *held])
    except (SpawnError, OSError) as exc:
        _report(report_fd, {"error": str(exc)})
        os._exit(0)
    finally:
        os.close(write_fd)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the wakeup fd
    me = os.getpid()
    record = {"shim": me, "start": start_time(me), "pid": worker, "started": time.time(),
              "devices": request.get("devices") or ""}
    write_atomic(record_path(log), json.dumps(record), durable=False)
    _report(report_fd, record)
    status = _serve(worker, read_fd, wake_r, log, request["marker"], pause)
    write_atomic(status_path(log), str(status), durable=False)
    os._exit(0)


def _report(fd: int, message: dict) -> None:
    try:
        os.write(fd, json.dumps(message).encode())
    except OSError:
        pass  # the starter is gone: the next kubelet finds the run by its record
    os.close(fd)


def _serve(worker: int, read_fd: int, wake_r: int, log: Path, marker: dict[str, str], pause: int | None) -> int:
    """Copy the pipe to the log until the worker exited, its leftovers are gone and the pipe is
    drained; the worker's wait status. `pause`: the PID 1 of the run's PID namespace, if it has one."""
    os.set_blocking(read_fd, False)
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    status: int | None = None
    drained_by: float | None = None
    partial = b""
    out = LogFile(log, lambda message: os.write(2, f"kfcockpit shim {os.getpid()}: {message}\n".encode()))
    try:
        while True:
            for pid, found in reap_exited():  # the worker, or an orphan of it (we are a subreaper)
                if pid == worker:
                    status = found
            if status is not None and drained_by is None:
                if pause is not None:  # what is left in the namespace, marked or not
                    pidns.end(pause)
                wait_gone(sweep(marker), _SWEPT_GONE_SECONDS)
                drained_by = time.monotonic() + _DRAIN_SECONDS
            if status is not None and (read_fd < 0 or time.monotonic() >= drained_by):
                break
            timeout = None if drained_by is None else max(0.0, drained_by - time.monotonic())
            for key, _ in selector.select(timeout):
                if key.fd == wake_r:
                    _drain(wake_r)
                    continue
                try:
                    data = os.read(read_fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not data:  # end of file: every writer closed it
                    selector.unregister(read_fd)
                    os.close(read_fd)
                    read_fd = -1
                    continue
                *lines, partial = (partial + data).split(b"\n")
                if lines:
                    out.write(lines)
                time.sleep(READ_INTERVAL)  # lines wait in the pipe meanwhile, nothing is lost
        if partial:
            out.write([partial])
    finally:
        out.close()
    return status


def _drain(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 512):
                return
        except BlockingIOError:
            return


def _exec_worker(request: dict) -> StartWorker:
    """A cold run's worker: the command as is, exec'd in the pod's cgroups (and mount namespace)."""
    def start(write_fd: int, _close: list[int]) -> int:  # spawn closes every other fd itself
        plan = request.get("confine")
        before_exec = None
        if plan:
            def before_exec() -> None:
                confine.enter(plan)
        # torchrun forwards SIGTERM to its workers, a Ray driver shuts its Ray down; a plain
        # program just ends.
        return spawn(request["argv"], request["env"], request["cwd"], write_fd, death_signal=signal.SIGTERM,
                     cgroups=request.get("cgroups") or (), before_exec=before_exec)
    return start


def main() -> int:
    fd = int(sys.argv[sys.argv.index("--fd") + 1])
    request = json.loads(os.read(fd, MAX_REQUEST))
    become(request, fd, _exec_worker(request))
    return 70  # not reached


if __name__ == "__main__":
    sys.exit(main())
