"""A pod's own PID namespace: it sees only its own processes, so another pod's files are not
reachable through /proc/PID/root (its pids are not there to name), nor the machine's.

Each shimmed run (shim.py) is laid out as a pod with a shared process namespace is upstream,
its pause container PID 1:

    shim (the machine's namespace) ─┬─ pause: PID 1 of the pod's namespace (`start_pause`)
                                    └─ worker: PID 2, started by the shim as before

Why a pause beside the worker and not an init above it (tini, docker --init): the worker stays
the shim's child, so everything the kubelet observes is unchanged: the worker's pid on this
machine (fork's answer in the shim), its wait status as the shim reaps it (a SIGKILL reads 137,
an OOM kill as upstream), its cgroups, its metrics and the throttle by that pid, adoption from
the shim's record. The kubelet signals the worker's process group from outside, and the worker
is not PID 1, so a SIGTERM ends a `sleep` at once: no PID 1 that ignores what it has no handler
for, no forwarding. The pause only reaps the orphans the namespace's processes leave (each
orphan goes to its namespace's PID 1), and it is what holds the namespace: when the worker has
exited the shim SIGKILLs it and the kernel ends whatever is left inside, whatever its
environment says; it ends with the shim, so a shim killed takes its run along at once.

The pause starts before the pod's mounts and chroot (confine.py), so its root is the machine's,
and a pod must not look into it through /proc/1/root, cwd or fd:
- as root it is `cat` reading a pipe only the shim writes to (it ends at the shim's end),
  spawned (vfork and exec) with SIGCHLD ignored, which an exec keeps, so the kernel reaps the
  orphans for it; a pod's capabilities are fewer than its pause's, which shuts /proc/1 to it;
- as anyone else pod and pause have the same uid and no capabilities, so the pause is a fork of
  the shim that makes itself non-dumpable (then /proc/1 needs CAP_SYS_PTRACE) before the shim
  forks the worker, dies with it (PR_SET_PDEATHSIG), and reaps.
A run pays an unshare and a spawn: medians of 40 starts on 2 shared cores (load 5 to 11), ~1 ms
cold, +7 to +15 ms warm (57 -> 69-73 ms). Forked instead, the pause cost +22 ms warm (a page-table
copy of a shim with torch imported); a small interpreter spawned as the pause, more.

The worker mounts a fresh procfs at the pod's /proc (confine.enter), which shows the namespace
it was mounted from. As root the shim unshares the PID namespace alone; as anyone else it
unshares a user namespace with it (its own uid and gid mapped), which the pod's mount namespace
then shares, as the procfs must be mounted by a holder of CAP_SYS_ADMIN in the user namespace
that owns the PID namespace. `available()` asks the kernel once; where it says no, the cluster
says so once and pods share the machine's namespace.

Not for a Ray driver's pod (container.py starts it without a shim): Ray's workers name
themselves by pid in their lines and the node watches those pids through pidfds (raypods.py).
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal

from backend.local.node import confine
from backend.processes import set_parent_death_signal

_PR_SET_DUMPABLE = 4
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork


def enter() -> None:
    """In the shim, before it forks anything of the run: the processes it forks from now on are
    in a new PID namespace, the first of them its PID 1 (the shim itself stays outside)."""
    confine.unshare(confine.CLONE_NEWPID)


def start_pause() -> tuple[int, int | None]:
    """Start the namespace's PID 1 (right after `enter`): its pid on this machine, and an fd the
    shim holds while it runs, which the worker must not keep (None: none)."""
    if os.geteuid() == 0:
        return _spawn_pause()
    shim = os.pidfd_open(os.getpid())
    pid = os.fork()
    if pid == 0:
        try:
            _pause(shim)
        finally:
            os._exit(0)
    os.close(shim)
    return pid, None


def _spawn_pause() -> tuple[int, int]:
    """Root's pause: `cat` reading a pipe that only the shim writes to, so it ends at the shim's
    end (EOF), spawned (vfork and exec: a fork of a warm shim, torch imported, costs 5-20 ms).
    SIGCHLD ignored, which an exec keeps, has the kernel reap the namespace's orphans for it. A
    pod cannot look into it: its capabilities are fewer than its pause's."""
    read_fd, write_fd = os.pipe()  # close-on-exec: the exec'd worker drops the write end
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        pid = os.posix_spawnp("cat", ["cat"], {}, file_actions=[
            (os.POSIX_SPAWN_DUP2, read_fd, 0), (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    except OSError:
        os.close(write_fd)
        raise
    finally:
        signal.signal(signal.SIGCHLD, previous)
        os.close(read_fd)
    return pid, write_fd


def end(pause: int) -> None:
    """SIGKILL the pause (sent from outside the namespace, it ends a PID 1 whatever its
    handlers): the kernel kills every process left in the namespace."""
    try:
        os.kill(pause, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _pause(shim: int) -> None:
    set_parent_death_signal(signal.SIGKILL)
    if select.select([shim], [], [], 0)[0]:  # the shim exited before the line above took effect
        return
    if _prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return  # a PID 1 whose root could be looked into: none, and the run ends with it
    os.closerange(3, 1 << 16)  # nothing of the run's (its log pipe, the kubelet's socket) held here
    os.chdir("/")
    # Python's SIGINT handler would end the pause, and its pod with it; with none, a PID 1 ignores it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:  # as Kubernetes' pause (build/pause/linux/pause.c): reap, nothing else
        signal.sigwait({signal.SIGCHLD})
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def available() -> str | None:
    """None when this machine lets a pod have a PID namespace of its own with its own /proc, else
    why not (one line). Asked in a forked child, so this process stays as it is."""
    if os.geteuid() == 0 and shutil.which("cat") is None:
        return "no `cat` on PATH for a pod's pause"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        code = 1
        try:
            enter()
            child = os.fork()
            if child == 0:  # PID 1 of the new namespace: mounts its /proc in a mount namespace of its own
                try:
                    confine.own_mount_namespace(user_namespace_made=True)
                    confine.mount_proc("/proc")
                    os._exit(0)
                except OSError as exc:
                    os.write(write_fd, str(exc).encode())
                    os._exit(1)
            code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        except OSError as exc:
            os.write(write_fd, str(exc).encode())
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        why = pipe.read().decode(errors="replace")
    _pid, status = os.waitpid(pid, 0)
    if not why and os.waitstatus_to_exitcode(status) != 0:
        why = "the probe failed"
    return why or None
