"""Processes as pods: start them in their own session, tie them to their parent, find and kill
every descendant, reap them without polling.

Three guarantees against orphans, from strongest to last resort:
- a pod's process gets PR_SET_PDEATHSIG, so it is signalled the moment its parent (its
  container's shim, node/shim.py) dies, even by SIGKILL; the shim itself has none, so pods
  outlive the controller, and is a subreaper, so what a pod starts stays below it;
- each pod is a session and process group of its own, so a kill reaches its descendants;
- every pod process carries KFCOCKPIT_CLUSTER_ID/KFCOCKPIT_POD in its environment, inherited by
  anything it starts (torchrun starts its workers in new sessions), so `sweep` finds them in
  /proc wherever they went.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

if TYPE_CHECKING:
    import asyncio

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl  # looked up before any fork: a forked child must not dlopen


class SpawnError(Exception):
    """The command could not be started (not found, not executable, bad directory)."""


def set_parent_death_signal(sig: int) -> None:
    if _prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def become_subreaper() -> None:
    """Orphaned descendants of our pods are re-parented to us (and reaped), not to init."""
    if _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def enter_pod_session(parent: int, death_signal: int, stdout_fd: int) -> None:
    """In a freshly forked child: own session, die with `parent` (unless `death_signal` is 0: a
    container's shim outlives its starter), output to the pod's log pipe."""
    os.setsid()
    if death_signal:
        set_parent_death_signal(death_signal)
    # The parent died before the line above took effect; 0: it lives, outside the PID namespace
    # this child was forked into (a pod's: node/pidns.py).
    if os.getppid() not in (parent, 0):
        os._exit(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(stdout_fd, 1)
    os.dup2(stdout_fd, 2)
    if devnull > 2:
        os.close(devnull)
    if stdout_fd > 2:
        os.close(stdout_fd)


def join_cgroup(procs_files: Sequence[str]) -> None:
    """Move the calling process into cgroups (their `cgroup.procs` files, one per hierarchy; "0"
    means the writer), so everything it starts is bounded with it."""
    for procs_file in procs_files:
        fd = os.open(procs_file, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


def spawn(argv: list[str], env: dict[str, str], cwd: str, stdout_fd: int,
          death_signal: int = signal.SIGKILL, keep_fds: tuple[int, ...] = (), cgroups: Sequence[str] = (),
          before_exec: Callable[[], None] | None = None) -> int:
    """fork + exec `argv` (PATH from `env`) as a new session, in `cgroups` (cgroup.procs files)
    when given, joined before exec so nothing it starts escapes; returns its pid.

    The caller must be single-threaded (the controller is: one asyncio thread). An exec failure
    comes back through a close-on-exec pipe as SpawnError, like subprocess does."""
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # child: only async-signal-safe work until exec
        try:
            join_cgroup(cgroups)
            enter_pod_session(parent, death_signal, stdout_fd)
            _close_fds_except({err_w, *keep_fds})
            for fd in keep_fds:  # Python opens everything close-on-exec
                os.set_inheritable(fd, True)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; programs expect defaults
                signal.signal(sig, signal.SIG_DFL)
            if before_exec is not None:  # e.g. the pod's own mount namespace (node/confine.py)
                before_exec()
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
            try:
                message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                os.write(err_w, f"{argv[0]}: {message}".encode())
            finally:
                os._exit(127)
    os.close(err_w)
    chunks = []
    while chunk := os.read(err_r, 4096):
        chunks.append(chunk)
    os.close(err_r)
    if chunks:
        os.waitpid(pid, 0)
        raise SpawnError(b"".join(chunks).decode(errors="replace"))
    return pid


def _close_fds_except(keep: set[int]) -> None:
    low = 3
    for fd in sorted(f for f in keep if f >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


class Children:
    """The exits of this process's children as futures, reaped on SIGCHLD (never polled). Pids
    nobody asked about are orphans of our pods re-parented to us (a subreaper): reaped too.
    Install it once per process, in a process that starts no asyncio subprocess."""

    def __init__(self) -> None:
        self._exits: dict[int, asyncio.Future[int]] = {}

    def install(self) -> None:
        import asyncio  # here, not at the top: a container's shim (node/shim.py) starts without it

        asyncio.get_running_loop().add_signal_handler(signal.SIGCHLD, self.reap)

    def uninstall(self) -> None:
        import asyncio

        asyncio.get_running_loop().remove_signal_handler(signal.SIGCHLD)

    def exit_of(self, pid: int) -> "asyncio.Future[int]":
        """A future with the wait status of our child `pid`."""
        import asyncio

        future = self._exits.get(pid)
        if future is None:
            future = self._exits[pid] = asyncio.get_running_loop().create_future()
        return future

    def reap(self) -> None:
        for pid, status in reap_exited():
            future = self._exits.pop(pid, None)
            if future is not None and not future.done():
                future.set_result(status)

    async def run(self, argv: list[str], env: dict[str, str], cwd: str, output: Path | None = None) -> int:
        """Run a helper program (not a pod) to its end; its exit code (127 when it cannot
        start). Its output goes to `output`, else nowhere."""
        fd = os.open(output or os.devnull, os.O_WRONLY | os.O_CLOEXEC | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            pid = spawn(argv, env, cwd, fd)
        except SpawnError:
            return 127
        finally:
            os.close(fd)
        return os.waitstatus_to_exitcode(await self.exit_of(pid))


def reap_exited() -> Iterator[tuple[int, int]]:
    """(pid, wait status) of each child that has exited, without blocking (call on SIGCHLD)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def marked_processes(required: dict[str, str]) -> Iterator[int]:
    """Pids of live processes whose environment holds every `required` key=value."""
    me = os.getpid()
    needles = {f"{k}={v}".encode() for k, v in required.items()}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = set(f.read().split(b"\0"))
        except OSError:  # gone, or another user's
            continue
        if needles <= environ:
            yield int(entry.name)


def sweep(required: dict[str, str], sig: int = signal.SIGKILL, spare: set[int] = frozenset()) -> list[int]:
    """Signal every live process marked with all of `required` but those in `spare`; returns
    their pids."""
    pids = [pid for pid in marked_processes(required) if pid not in spare]
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    return pids


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (the state first), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot): with its pid, what names one process
    across pid reuse. None when it is gone."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def open_pidfd(pid: int, started: int) -> int | None:
    """A pidfd on the process `pid` that started at `started` (start_time), None when it is gone
    (or the pid is another's now)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if start_time(pid) != started:
        os.close(fd)
        return None
    return fd


def descendants(roots: set[int]) -> set[int]:
    """`roots` and every live process below them (by parent pid)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _pidfds(pids: list[int]) -> dict[int, int]:
    """fd -> pid of a pidfd per live process (the gone ones are left out)."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except OSError:  # already gone
            continue
    return fds


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Block until these processes exit (a pidfd event each, no polling of /proc) or `timeout`
    passes; returns the pids still alive."""
    fds = _pidfds(pids)
    try:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        remaining = set(fds)
        end = time.monotonic() + timeout
        while remaining and (left := end - time.monotonic()) > 0:
            for fd, _ in poller.poll(left * 1000):
                remaining.discard(fd)
                poller.unregister(fd)
        return [fds[fd] for fd in remaining]
    finally:
        for fd in fds:
            os.close(fd)


async def wait_gone_async(pids: list[int], timeout: float) -> list[int]:
    """`wait_gone` in the event loop (no thread: the controller forks, so it stays single-threaded)."""
    import asyncio

    fds = _pidfds(pids)
    if not fds:
        return []
    loop = asyncio.get_running_loop()
    remaining = set(fds)
    all_gone = loop.create_future()

    def readable(fd: int) -> None:
        loop.remove_reader(fd)
        remaining.discard(fd)
        if not remaining and not all_gone.done():
            all_gone.set_result(None)

    for fd in fds:
        loop.add_reader(fd, readable, fd)
    try:
        await asyncio.wait_for(asyncio.shield(all_gone), timeout)
    except asyncio.TimeoutError:
        pass
    finally:
        for fd in fds:
            if fd in remaining:
                loop.remove_reader(fd)
            os.close(fd)
    return [fds[fd] for fd in remaining]


def is_zombie_or_gone(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def describe_exit(status: int) -> tuple[int, str]:
    """(exit code as Kubernetes reports it, reason) of a wait status."""
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return 0, "Completed"
    if code < 0:
        sig = -code
        return 128 + sig, "Killed" if sig == signal.SIGKILL else f"Signal{signal.Signals(sig).name[3:].title()}"
    return code, "Error"
