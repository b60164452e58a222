"""The node's bounds on its pods, as the kubelet's cgroups make them: each pod's processes and
threads counted together against its podPidsLimit (--pod-max-pids), and every pod's memory
together against the node's allocatable memory (--enforce-node-allocatable=pods: the kubepods
cgroup). A pod that asks for 100,000 processes fails at its pids limit, and what the processes it
did start take is bounded by the node's allocatable memory (the kernel's OOM killer acts inside
the node's cgroup, never on the cluster's own processes or the rest of the machine).

Where the machine lets this process make cgroups: under its own cgroup in the unified (v2)
hierarchy when the controllers can be enabled there (the node's cgroup `kfcockpit-<name>` with
memory.max, a child per pod with pids.max), else in the v1 `pids` and `memory` hierarchies (what
a container running as root often has; the node's memory cgroup holds the pods' processes
directly). A pod's processes join before they exec or run (processes.join_cgroup), so nothing
they start escapes. Where a hierarchy is not writable that bound is missing: RLIMIT_NPROC counts a
whole user's processes (root is exempt) and RLIMIT_AS would break torch's address-space
reservations, so neither stands in; the node says what is missing in its Ready condition, as a
kubelet whose podPidsLimit is -1 runs pods unbounded. Per-pod memory limits are the container's
own (resources.limits), not this module's.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

log = logging.getLogger("kfcockpit.kubelet")

DEFAULT_POD_PIDS = 1024  # processes and threads per pod (upstream's default is unlimited: -1)
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


class PodCgroups:
    """The cgroups of one node's pods: `pids` (the per-pod pids cgroups' parent), `memory` (the
    node's memory cgroup, limited to its allocatable memory); each None where not available."""

    def __init__(self, pids: Path | None = None, memory: Path | None = None, unified: bool = False,
                 memory_max: int = 0):
        self.pids, self.memory, self.unified, self.memory_max = pids, memory, unified, memory_max
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
        pids = memory = None
        for fstype, mount, options in _mounts():
            if fstype == "cgroup2":
                own = mount / _own("").lstrip("/")
                _remove_stale(own)
                base = _writable_dir(own, node)
                if base is not None and _enable(base, "pids"):
                    if memory_max and _enable(base, "memory") and _limit(base / "memory.max", memory_max):
                        memory = base
                    return cls(base, memory, unified=True, memory_max=memory_max)
            elif "pids" in options.split(",") and pids is None:
                own = mount / _own("pids").lstrip("/")
                _remove_stale(own)
                pids = _writable_dir(own, node)
            elif "memory" in options.split(",") and memory is None and memory_max:
                own = mount / _own("memory").lstrip("/")
                _remove_stale(own)
                base = _writable_dir(own, node)
                if base is not None and _limit(base / "memory.limit_in_bytes", memory_max):
                    memory = base
        return cls(pids, memory, memory_max=memory_max)

    def pod(self, uid: str, pids_max: int) -> tuple[str, ...]:
        """The cgroup.procs files a pod's processes join: its own pids cgroup (pids.max set) and
        the node's memory cgroup (in v2 its pids cgroup lies inside the node's, which is both)."""
        joined = []
        if self.pids is not None:
            procs = self._pod_pids(uid, pids_max)
            if procs:
                joined.append(procs)
        if self.memory is not None and not self.unified:
            joined.append(str(self.memory / "cgroup.procs"))
        return tuple(joined)

    def _pod_pids(self, uid: str, pids_max: int) -> str | None:
        directory = self.pids / uid
        for last in (False, True):
            try:
                if not self.pids.is_dir():  # an idle node's, removed by a starting one as stale
                    self.pids.mkdir()
                    if self.unified:
                        _enable(self.pids, "pids")
                        if self.memory_max and _enable(self.pids, "memory"):
                            _limit(self.pids / "memory.max", self.memory_max)
                directory.mkdir(exist_ok=True)
                (directory / "pids.max").write_text(str(pids_max) if pids_max > 0 else "max")
                return str(directory / "cgroup.procs")
            except FileNotFoundError:
                if last:
                    break
            except OSError as exc:
                log.warning("pod %s: no pids cgroup (%s); its processes are not bounded", uid, exc)
                return None
        log.warning("pod %s: no pids cgroup (its node's was removed meanwhile); its processes are not bounded", uid)
        return None

    def hit_limit(self, uid: str) -> bool:
        """Whether the pod was refused a process by its limit (pids.events' max count)."""
        if self.pids is None:
            return False
        try:
            for line in (self.pids / uid / "pids.events").read_text().splitlines():
                key, _, count = line.partition(" ")
                if key == "max" and int(count) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def release(self, uid: str) -> None:
        if self.pids is not None:
            try:
                os.rmdir(self.pids / uid)  # a cgroup directory goes by rmdir once it holds no process
            except OSError:
                pass

    def close(self) -> None:
        """Remove what is left (empty cgroups of pods gone) and this node's own."""
        for node in {self.pids, self.memory} - {None}:
            if node.exists():
                for child in node.iterdir():
                    if child.is_dir():
                        try:
                            os.rmdir(child)
                        except OSError:
                            pass
                try:
                    os.rmdir(node)
                except OSError:
                    pass


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
        if controller == "pids":
            try:
                os.rmdir(base)
            except OSError:
                pass
        return False
