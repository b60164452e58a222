"""A pod's own view of the files: a mount namespace in which its volumes, projected tokens,
ConfigMaps and Secrets are bound at their mountPaths and the cluster's state is not there.

Without it a pod sees what its user sees: the admin token, the service-account signing key and
every namespace's volumes under the state root, and its volumes only where the kubelet rewrote a
path in its argv or env (a script opening /checkpoints/x from a config file got ENOENT).

A container has an image for a root; a pod here has this machine's. So each pod gets a root of
its own: an empty tmpfs holding a bind of every top-level entry of the machine's root (/usr,
/etc, /proc, ...), its mountPaths bound on top, and the state root and the kubeconfig covered
by empty ones. A mountPath inside a directory of the machine (/etc/app/x) gets a mount point in
a tmpfs laid over that directory in the pod's view, with the directory's entries bound back, so
nothing is ever created on the machine. The pod then chroots into it. About 30 mounts, a few
milliseconds, in the forked child before exec (or before a warm worker runs).

As root the pod's process unshares the mount namespace; as anyone else it unshares a user
namespace too (mapping its own uid and gid, so files keep their owners), where the kernel allows
unprivileged ones, and an exec'd command then has no capability left to undo the mounts.
`available()` asks the kernel once; where it says no, the cluster says so once and pods keep the
path rewrite (podspec.rewrite_mounts). A root pod keeps only the capabilities a container
runtime's default set gives (containerd's and Docker's): without CAP_SYS_ADMIN it cannot undo its
mounts, without CAP_DAC_READ_SEARCH it cannot open the state by file handle, and it cannot look
into the controller's root through /proc. Another pod's root through /proc/PID/root is closed by
a PID namespace per pod (pidns.py, where the kernel allows): the pod's /proc is then a procfs of
its own namespace, not a bind of the machine's, so no other pod's pid is there to name. A Ray
driver's pod has none (its workers are known by their pids on this machine: raypods.py), and
keeps the machine's /proc.

Runs in a forked child: the libc functions are looked up at import, never after a fork.
"""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_unshare, _mount, _prctl, _capget, _capset = _libc.unshare, _libc.mount, _libc.prctl, _libc.capget, _libc.capset
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
CLONE_NEWPID = 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC = 32, 4096, 16384
_MS_UNBINDABLE, _MS_PRIVATE = 1 << 17, 1 << 18
_PR_CAPBSET_DROP = 24
# containerd's default capabilities (oci/spec.go defaultUnixCaps), by number: CHOWN, DAC_OVERRIDE,
# FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP, NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, MKNOD,
# AUDIT_WRITE, SETFCAP.
_KEPT_CAPS = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31})
_CAPS_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


# statvfs flags a read-only remount must keep (a user namespace may not clear them), as mount flags.
_KEPT_FLAGS = ((os.ST_NOSUID, 2), (os.ST_NODEV, 4), (os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024),
               (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21))


def _call(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _bind(source: str, target: str, read_only: bool = False) -> None:
    _call(_mount(source.encode(), target.encode(), None, _MS_BIND | _MS_REC, None), f"bind {source} on {target}")
    if read_only:
        kept = os.statvfs(target).f_flag
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | sum(m for st, m in _KEPT_FLAGS if kept & st)
        _call(_mount(None, target.encode(), None, flags, None), f"read-only {target}")


def _tmpfs(target: str, read_only: bool = False) -> None:
    flags = _MS_NOSUID | _MS_NODEV | (_MS_RDONLY if read_only else 0)
    _call(_mount(b"tmpfs", target.encode(), b"tmpfs", flags, b"mode=0755,size=1m"), f"tmpfs on {target}")


def _copy_entry(host: str, inner: str) -> None:
    """Make `inner` (in the new root) what `host` is: a symlink, or a bind of it."""
    if os.path.islink(host):
        os.symlink(os.readlink(host), inner)
    elif os.path.isdir(host):
        os.mkdir(inner)
        _bind(host, inner)
    elif os.path.exists(host):
        open(inner, "x").close()
        _bind(host, inner)


def mount_proc(target: str) -> None:
    """A fresh procfs at `target`: the processes of this process's PID namespace (pidns.py)."""
    _call(_mount(b"proc", target.encode(), b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None), f"proc on {target}")


class _Root:
    """The pod's root being built at `top` (a tmpfs). A path P in it is the machine's P until a
    mountPath is made inside it; `ours` holds the directories that are the pod's own tmpfs.
    `own_proc`: a procfs of the pod's own PID namespace at /proc, not the machine's."""

    def __init__(self, top: str, own_proc: bool):
        self.top = top
        _tmpfs(top)
        # Not copied by the binds below, though it sits inside one of them (the state root).
        _call(_mount(None, top.encode(), None, _MS_UNBINDABLE, None), "unbindable root")
        self.ours = {"/"}
        for entry in os.listdir("/"):
            if entry == "proc" and own_proc:
                os.mkdir(f"{top}/proc")
                mount_proc(f"{top}/proc")
            else:
                _copy_entry(f"/{entry}", f"{top}/{entry}")

    def inner(self, path: str) -> str:
        return self.top + path

    def _resolve(self, directory: str, name: str, depth: int = 0) -> str:
        """`directory/name` with a symlink there followed, as the pod will see it."""
        path = os.path.join(directory, name)
        if depth > 16 or not os.path.islink(self.inner(path)):
            return path
        link = os.readlink(self.inner(path))
        parent = os.path.normpath(os.path.join(directory, link))
        return self._resolve(os.path.dirname(parent), os.path.basename(parent), depth + 1)

    def _shadow(self, directory: str) -> None:
        """Lay a tmpfs over the machine's `directory` in this view, its entries bound back."""
        entries = os.listdir(self.inner(directory))
        _tmpfs(self.inner(directory))
        for entry in entries:
            _copy_entry(os.path.join(directory, entry), os.path.join(self.inner(directory), entry))
        self.ours.add(directory)

    def mount_point(self, path: str, directory: bool) -> str:
        """The path in the new root to mount at `path`, made without touching the machine."""
        current = "/"
        parts = [p for p in path.split("/") if p]
        for i, name in enumerate(parts):
            resolved = self._resolve(current, name)
            last = i == len(parts) - 1
            if not os.path.lexists(self.inner(resolved)):
                if current not in self.ours:
                    self._shadow(current)
                if last and not directory:
                    open(self.inner(resolved), "x").close()
                else:
                    os.mkdir(self.inner(resolved))
                    self.ours.add(resolved)
            current = resolved
        return self.inner(current)


def unshare(flags: int) -> None:
    """unshare(2) `flags`; not root, with a user namespace of its own too (created first, so it
    owns the others) that maps its uid and gid to themselves."""
    if os.geteuid() == 0:
        _call(_unshare(flags), f"unshare({flags:#x})")
        return
    uid, gid = os.geteuid(), os.getegid()
    _call(_unshare(_CLONE_NEWUSER | flags), f"unshare(CLONE_NEWUSER|{flags:#x})")
    for name, line in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def own_mount_namespace(user_namespace_made: bool = False) -> None:
    """A mount namespace of this process's own, private from the machine's; not root, inside a
    user namespace of its own, unless `user_namespace_made` (its PID namespace's: pidns.enter)."""
    if user_namespace_made:
        _call(_unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    else:
        unshare(_CLONE_NEWNS)
    _call(_mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "private /")


def enter(plan: dict) -> None:
    """In a pod's forked, single-threaded process, before it runs anything of the pod: its own
    mount namespace and root. `plan`: {"root": an empty directory to build the root on,
    "mounts": [[mountPath, source, read_only], ...], "hide": [paths], "cwd": the pod's cwd,
    "pid_namespace": whether this process is in its pod's own PID namespace (pidns.py)}."""
    own_pids = bool(plan.get("pid_namespace"))
    own_mount_namespace(user_namespace_made=own_pids)
    root = _Root(plan["root"], own_proc=own_pids)
    for target, source, read_only in sorted(plan["mounts"], key=lambda m: m[0].count("/")):
        _bind(source, root.mount_point(target, os.path.isdir(source)), read_only)
    for path in plan["hide"]:
        inner = root.inner(path)
        if os.path.isdir(inner):
            _tmpfs(inner, read_only=True)
        elif os.path.exists(inner):
            _bind("/dev/null", inner)
    os.chroot(plan["root"])
    os.chdir(plan["cwd"])
    _drop_capabilities()


def _drop_capabilities() -> None:
    """Keep only _KEPT_CAPS: out of the bounding set (what an exec'd command can have) and out of
    this process's own sets (a warm worker runs without exec)."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap not in _KEPT_CAPS:
            _call(_prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    header, data = _CapHeader(_CAPS_VERSION_3, 0), (_CapData * 2)()
    _call(_capget(ctypes.byref(header), data), "capget")
    for word in range(2):
        kept = sum(1 << (cap - 32 * word) for cap in _KEPT_CAPS if 32 * word <= cap < 32 * (word + 1))
        data[word].effective &= kept
        data[word].permitted &= kept
        data[word].inheritable &= kept
    _call(_capset(ctypes.byref(header), data), "capset")


def available() -> str | None:
    """None when this machine lets a pod have a mount namespace of its own, else why not (one
    line). Asked in a forked child, so this process's mounts stay as they are."""
    if not hasattr(os, "fork"):
        return "no fork on this platform"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            own_mount_namespace()
            _tmpfs("/tmp")
            code = 0
        except OSError as exc:
            os.write(write_fd, str(exc).encode())
            code = 1
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        why = pipe.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return why or None
