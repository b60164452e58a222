"""The warm-worker zygote: a process that has torch imported and forks one worker per pod.

    python -m backend.local.node.zygote --fd N     (started by the controller, never by hand)

Starting python and importing torch costs ~1.5 s per process on a small machine, which is most
of a recovery. The zygote pays it once; a fork costs milliseconds. Each forked worker does what
torchrun does for one process per node (the env comes in the request, computed by
`podspec.torchrun_worker_env`) and runs the module or script in-process with runpy, as
`python -u -m MOD` would. Forking is safe because the zygote stays single-threaded: it imports
with OMP_NUM_THREADS=1 (numpy's BLAS pool would otherwise start a thread) and refuses to serve
if a thread exists after the imports; the controller then runs pods cold (exact torchrun).

Protocol on the SOCK_SEQPACKET socket `--fd` (one JSON message per packet):
  zygote -> controller  {"op": "ready", "pid", "seconds"} | {"op": "unfit", "error"}
  controller -> zygote  {"op": "spawn", "kind", "target", "args", "env", "cwd", "cgroups", "confine",
                         and the shim's "log", "marker", "devices"} + the socket the shim reports on
For each spawn the zygote forks the run's shim (shim.py), which forks the worker and reports it
(or the zygote reports why it could not fork) on that socket. The zygote exits when the
controller closes the socket, and dies with the controller (PR_SET_PDEATHSIG); the shims and
their workers do not: a pod outlives the control plane.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import selectors
import signal
import socket
import sys
import time

from backend.local.node import confine, shim
from backend.processes import enter_pod_session, join_cgroup, reap_exited

PRELOAD = ("numpy", "torch", "torch.nn", "torch.nn.functional", "torch.nn.parallel", "torch.optim",
           "torch.distributed", "torch.utils.data",
           "torch._dynamo")  # DDP and the optimizers import dynamo lazily: 1.3 s on the first step
_MAX_PACKET = 1 << 20


def _send(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def main() -> int:
    fd = int(sys.argv[sys.argv.index("--fd") + 1])
    sock = socket.socket(fileno=fd)
    started = time.perf_counter()
    for name in PRELOAD:
        importlib.import_module(name)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        _send(sock, {"op": "unfit", "error": f"{threads} threads after importing torch; "
                     "forking would be unsafe (set OMP_NUM_THREADS=1)"})
        return 1
    _send(sock, {"op": "ready", "pid": os.getpid(), "seconds": round(time.perf_counter() - started, 3)})
    return _serve(sock)


def _serve(sock: socket.socket) -> int:
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the wakeup fd
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    own = (sock, selector, wake_r, wake_w)
    while True:
        for key, _ in selector.select():
            if key.fileobj is sock:
                data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_PACKET, 4)
                if not data:
                    return 0  # the controller closed (its shims and workers live on)
                request = json.loads(data)
                if request.get("op") == "spawn":
                    _spawn(request, fds[0], own)
            else:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
                for _exited in reap_exited():  # its shims; they recorded their runs' ends themselves
                    pass


def _spawn(request: dict, report_fd: int, own) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as exc:
        os.write(report_fd, json.dumps({"error": str(exc)}).encode())
        os.close(report_fd)
        return
    if pid == 0:
        try:
            _become_shim(request, report_fd, own)
        finally:
            os._exit(70)  # only reached if becoming the shim itself failed
    os.close(report_fd)


def _become_shim(request: dict, report_fd: int, own) -> None:
    sock, selector, wake_r, wake_w = own
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    selector.close()
    sock.close()
    os.close(wake_r)
    os.close(wake_w)

    def fork_worker(log_fd: int, close: list[int]) -> int:
        shim_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                for fd in close:
                    os.close(fd)
                _become_worker(request, log_fd, shim_pid)
            finally:
                os._exit(70)  # only reached if becoming the worker itself failed
        return pid
    shim.become(request, report_fd, fork_worker)


def _become_worker(request: dict, log_fd: int, parent: int) -> None:
    join_cgroup(request.get("cgroups") or ())  # the pod's bounds, before anything of the worker runs
    enter_pod_session(parent, signal.SIGKILL, log_fd)
    if request.get("confine"):
        try:
            confine.enter(request["confine"])
        except OSError as exc:  # said in the pod's log; the pod fails as a command that cannot start
            os.write(2, f"kfcockpit: cannot give the pod its mounts: {exc}\n".encode())
            os._exit(127)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # python -u: unbuffered binary layer, text written through at once.
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True,
                                                   errors="backslashreplace")
    os._exit(_run(request))


def _run(request: dict) -> int:
    """Run the module or script as __main__, the way `python -u -m MOD ARGS` would; exit code."""
    import atexit
    import random
    import runpy
    import traceback

    # A fresh interpreter seeds these from the OS; forks would otherwise share the zygote's.
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    kind, target, args = request["kind"], request["target"], request["args"]
    sys.path[0] = os.path.dirname(os.path.abspath(target)) if kind == "script" else os.getcwd()
    code = 0
    try:
        if kind == "module":
            sys.argv = [target, *args]  # runpy replaces argv[0] with the module's file
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *args]
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException as exc:  # noqa: BLE001 - printed like the interpreter would, then exit 1
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>"):
            tb = tb.tb_next  # the launcher's own frames: a plain `python -m` shows none
        traceback.print_exception(type(exc), exc, tb)
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    return code


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
