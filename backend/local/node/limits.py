"""Each pod's processes bounded together, as the kubelet's podPidsLimit (--pod-max-pids) bounds a
pod: a pids cgroup of its own whose pids.max counts every process and thread of the pod, so a pod
that asks for 100,000 processes fails when it reaches the limit instead of taking the host.

Where the machine lets this process make cgroups: under its own cgroup in the unified (v2)
hierarchy when the pids controller can be enabled there, else in the v1 pids hierarchy (what a
container running as root often has). A pod's processes join its cgroup before they exec or run
(processes.join_cgroup), so nothing they start escapes it. Where neither is writable there is no
per-pod bound (RLIMIT_NPROC counts a whole user's processes, and root is exempt from it): the
node says so in its conditions and pods run unbounded, as on a kubelet whose podPidsLimit is -1.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("kfcockpit.kubelet")

DEFAULT_POD_PIDS = 1024  # processes and threads per pod (upstream's default is unlimited: -1)


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


def _own(version_prefix: str) -> str:
    """This process's cgroup path in a hierarchy ("0::" for v2, "N:pids:" for v1's pids)."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                number, controllers, path = line.rstrip("\n").split(":", 2)
                if (version_prefix == "0::" and number == "0" and not controllers) or \
                        (version_prefix == "pids" and "pids" in controllers.split(",")):
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
    """The pids cgroups of one node's pods, under `<hierarchy>/<own cgroup>/kfcockpit-<name>`."""

    def __init__(self, base: Path | None, problem: str = ""):
        self.base, self.problem = base, problem

    @classmethod
    def find(cls, name: str) -> "PodCgroups":
        for fstype, mount, options in _mounts():
            if fstype == "cgroup2":
                own = mount / _own("0::").lstrip("/")
                base = _writable_dir(own, f"kfcockpit-{name}")
                if base is not None and _enable_pids(base):
                    return cls(base)
            elif "pids" in options.split(","):
                base = _writable_dir(mount / _own("pids").lstrip("/"), f"kfcockpit-{name}")
                if base is not None:
                    return cls(base)
        return cls(None, "no writable pids cgroup on this machine: pods' processes are not bounded")

    def pod(self, uid: str, pids_max: int) -> str | None:
        """The cgroup.procs file a pod's processes join (pids.max set), or None without cgroups."""
        if self.base is None:
            return None
        directory = self.base / uid
        try:
            directory.mkdir(exist_ok=True)
            (directory / "pids.max").write_text(str(pids_max) if pids_max > 0 else "max")
        except OSError as exc:
            log.warning("pod %s: no pids cgroup (%s); its processes are not bounded", uid, exc)
            return None
        return str(directory / "cgroup.procs")

    def hit_limit(self, uid: str) -> bool:
        """Whether the pod was refused a process by its limit (pids.events' max count)."""
        if self.base is None:
            return False
        try:
            for line in (self.base / uid / "pids.events").read_text().splitlines():
                key, _, count = line.partition(" ")
                if key == "max" and int(count) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def release(self, uid: str) -> None:
        if self.base is not None:
            try:
                os.rmdir(self.base / uid)  # a cgroup directory goes by rmdir once it holds no process
            except OSError:
                pass

    def close(self) -> None:
        """Remove what is left (empty cgroups of pods gone) and this node's own."""
        if self.base is not None and self.base.exists():
            for child in self.base.iterdir():
                if child.is_dir():
                    self.release(child.name)
            try:
                os.rmdir(self.base)
            except OSError:
                pass


def _enable_pids(base: Path) -> bool:
    """In v2, pods' cgroups get pids.max only when the parent enables the pids controller for
    its children (a cgroup holding processes itself cannot: "no internal processes")."""
    control = base / "cgroup.subtree_control"
    try:
        if "pids" not in control.read_text().split():
            control.write_text("+pids")
        return True
    except OSError:
        try:
            os.rmdir(base)
        except OSError:
            pass
        return False
