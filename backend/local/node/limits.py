"""The node's bounds on its pods, as the kubelet's cgroups make them: each pod's processes and threads
counted together against its podPidsLimit (--pod-max-pids), and every pod's memory together against
the node's allocatable memory (--enforce-node-allocatable=pods: the kubepods cgroup). A pod that
asks for 100,000 processes fails at its pids limit, and what the processes it did start take is
bounded by the node's allocatable memory (the kernel's OOM killer acts inside the node's cgroup,
never on the cluster's own processes or the rest of the machine).

Where the machine lets this process make cgroups: under its own cgroup in the unified (v2)
hierarchy when the controllers can be enabled there (the node's cgroup `kfcockpit-<name>` with
memory.max, a child per pod with pids.max), else in the v1 `pids` and `memory` hierarchies (what a
container running as root often has; there the node's cgroup and a child per pod in each). A pod's
processes join before they exec or run (processes.join_cgroup), so nothing they start escapes. A
node idle for a while may find its cgroups removed by another node starting (the stale ones of
killed nodes go that way) and makes them again for its next pod. Where a hierarchy is not writable
that bound is missing: RLIMIT_NPROC counts a whole user's processes (root is exempt) and RLIMIT_AS
would break torch's address-space reservations, so neither stands in; the node says what is missing
in its Ready condition, as a kubelet whose podPidsLimit is -1 runs pods unbounded. A pod with
resources.limits.memory gets it as its own cgroup's memory limit, and a process the kernel kills
there makes the container's end OOMKilled, as the kubelet reports it.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger("kfcockpit.kubelet")

STALE_SECONDS = 60.0


def _mounts() -> list[tuple[str, Path, str]]:
    """(filesystem type, mount point, super options) of the cgroup mounts of this process."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                dash = fields.index("-")
                found.append((fields[dash + 1], Path(fields[4]), fields[dash + 3] if len(fields) > dash + 3 else ""))
    except (OSError, ValueError, IndexError):
        pass
    return [m for m in found if m[0] in ("cgroup", "cgroup2")]


def _own(controller: str) -> str:
    """This process's cgroup path in a hierarchy ("" for v2's unified one, else a v1 controller)."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                number, controllers, path = line.rstrip("\n").split(":", 2)
                if (not controller and number == "0" and not controllers) or \
                        (controller and controller in controllers.split(",")):
                    return path
    except (OSError, ValueError):
        pass
    return "/"


def _writable_dir(parent: Path, name: str) -> Path | None:
    target = parent / name
    try:
        target.mkdir(exist_ok=True)
    except OSError:
        return None
    return target if (target / "cgroup.procs").exists() else None


class _Hierarchy:
    """A node's cgroup in one hierarchy and its pods' children there. `setup` (re)makes the
    node's own settings: a node idle long enough may find its cgroup removed as stale by another
    node starting, and makes it again for its next pod."""

    def __init__(self, base: Path, setup: Callable[[Path], bool], pids: bool, memory_file: str | None = None):
        """`memory_file`: where a pod's memory limit goes in this hierarchy (memory.max in v2,
        memory.limit_in_bytes in v1's memory one), None where it has no memory controller."""
        self.base, self.setup, self.pids, self.memory_file = base, setup, pids, memory_file

    def pod(self, uid: str, pids_max: int, memory_max: int = 0) -> str | None:
        directory = self.base / uid
        for last in (False, True):
            try:
                if not self.base.is_dir():
                    self.base.mkdir()
                    self.setup(self.base)
                directory.mkdir(exist_ok=True)
                if self.pids:
                    (directory / "pids.max").write_text(str(pids_max) if pids_max > 0 else "max")
                if self.memory_file and memory_max > 0:
                    (directory / self.memory_file).write_text(str(memory_max))
                return str(directory / "cgroup.procs")
            except FileNotFoundError:  # removed between the check and the mkdir
                if last:
                    break
            except OSError as exc:
                log.warning("pod %s: no cgroup in %s (%s); it is not bounded there", uid, self.base, exc)
                return None
        return None

    def release(self, uid: str) -> None:
        try:
            os.rmdir(self.base / uid)  # a cgroup directory goes by rmdir once it holds no process
        except OSError:
            pass

    def close(self) -> None:
        if self.base.exists():
            for child in self.base.iterdir():
                if child.is_dir():
                    self.release(child.name)
            try:
                os.rmdir(self.base)
            except OSError:
                pass


class PodCgroups:
    """The cgroups of one node's pods: `pids` (the per-pod pids cgroups' parent), `memory` (the
    node's memory cgroup, limited to its allocatable memory, the pods' cgroups inside it); each
    None where not available. In v2 both are one directory."""

    def __init__(self, hierarchies: list[_Hierarchy] | None = None, pids: Path | None = None,
                 memory: Path | None = None):
        self.hierarchies, self.pids, self.memory = hierarchies or [], pids, memory
        missing = [c for c, found in (("pids", pids), ("memory", memory)) if found is None]
        bounded = {"pids": "processes", "memory": "memory"}
        self.problem = (f"no writable {' or '.join(missing)} cgroup on this machine: pods' "
                        f"{' and '.join(bounded[c] for c in missing)} not bounded") if missing else ""

    @property
    def base(self) -> Path | None:  # the per-pod pids cgroups' parent
        return self.pids

    @classmethod
    def find(cls, name: str, memory_max: int = 0) -> "PodCgroups":
        """This node's cgroups (its stale siblings, nodes that were killed, removed first);
        `memory_max` bytes for all its pods together (0: no memory bound)."""
        node = f"kfcockpit-{name}"
        found: dict[str, _Hierarchy] = {}
        for fstype, mount, options in _mounts():
            if fstype == "cgroup2":
                own = mount / _own("").lstrip("/")
                _remove_stale(own)

                def unified(base: Path) -> bool:
                    return _enable(base, "pids") and (not memory_max or (
                        _enable(base, "memory") and _limit(base / "memory.max", memory_max)))
                base = _writable_dir(own, node)
                if base is not None and unified(base):
                    both = _Hierarchy(base, unified, pids=True, memory_file="memory.max" if memory_max else None)
                    return cls([both], base, base if memory_max else None)
                continue
            controllers = options.split(",")
            if "pids" in controllers and "pids" not in found:
                own = mount / _own("pids").lstrip("/")
                _remove_stale(own)
                base = _writable_dir(own, node)
                if base is not None:
                    found["pids"] = _Hierarchy(base, lambda _: True, pids=True)
            elif "memory" in controllers and "memory" not in found and memory_max:
                own = mount / _own("memory").lstrip("/")
                _remove_stale(own)

                def limited(base: Path) -> bool:
                    return _limit(base / "memory.limit_in_bytes", memory_max)
                base = _writable_dir(own, node)
                if base is not None and limited(base):
                    found["memory"] = _Hierarchy(base, limited, pids=False, memory_file="memory.limit_in_bytes")
        return cls(list(found.values()), found["pids"].base if "pids" in found else None,
                   found["memory"].base if "memory" in found else None)

    def pod(self, uid: str, pids_max: int, memory_max: int = 0) -> tuple[str, ...]:
        """The cgroup.procs files a pod's processes join: its own cgroup in each hierarchy (in
        the pids one with pids.max set, in the memory one with its memory limit: the container's
        resources.limits.memory, 0 for none), inside the node's."""
        return tuple(procs for h in self.hierarchies if (procs := h.pod(uid, pids_max, memory_max)))

    def oom_killed(self, uid: str) -> bool:
        """Whether the kernel's OOM killer ended a process of the pod at its memory limit (the
        oom_kill count of memory.events in v2, of memory.oom_control in v1)."""
        if self.memory is None:
            return False
        return any(_counted(self.memory / uid / name, "oom_kill") for name in ("memory.events", "memory.oom_control"))

    def hit_limit(self, uid: str) -> bool:
        """Whether the pod was refused a process by its limit (pids.events' max count)."""
        return self.pids is not None and _counted(self.pids / uid / "pids.events", "max")

    def release(self, uid: str) -> None:
        for hierarchy in self.hierarchies:
            hierarchy.release(uid)

    def close(self) -> None:
        """Remove what is left (empty cgroups of pods gone) and this node's own."""
        for hierarchy in self.hierarchies:
            hierarchy.close()


def _counted(events: Path, key: str) -> bool:
    """Whether a cgroup's `<key> <count>` events file counts `key` above zero (False when the file
    is not there or not readable)."""
    try:
        for line in events.read_text().splitlines():
            name, _, count = line.partition(" ")
            if name == key and int(count) > 0:
                return True
    except (OSError, ValueError):
        pass
    return False


def _remove_stale(parent: Path) -> None:
    """Nodes' cgroups under `parent` that hold no process and were made over STALE_SECONDS ago (a
    killed node leaves its own). The kernel refuses to remove a cgroup that holds a process, so a
    live pod's is never touched, and the age spares one made for a pod about to join it."""
    try:
        nodes = [d for d in parent.glob("kfcockpit-*") if d.is_dir()]
    except OSError:
        return
    old = time.time() - STALE_SECONDS
    for node in nodes:
        try:
            for pod in node.iterdir():
                if pod.is_dir() and pod.stat().st_ctime < old:
                    os.rmdir(pod)
            if node.stat().st_ctime < old:
                os.rmdir(node)
        except OSError:
            continue


def _limit(path: Path, value: int) -> bool:
    try:
        path.write_text(str(value))
        return True
    except OSError as exc:
        log.warning("cannot set %s: %s", path, exc)
        return False


def _enable(base: Path, controller: str) -> bool:
    """In v2, a cgroup's children get a controller's files only when it enables the controller for
    them (a cgroup holding processes itself cannot: "no internal processes")."""
    control = base / "cgroup.subtree_control"
    try:
        if controller not in control.read_text().split():
            control.write_text(f"+{controller}")
        return True
    except OSError:
        return False
