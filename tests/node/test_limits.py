"""The node's cgroups (limits.py) on this machine: a pod's cgroup in each hierarchy, inside the
node's; a node whose cgroups were removed while it was idle (as another node starting removes a
killed node's) makes them again, its memory limit included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backend.local.node.limits import PodCgroups


def test_a_node_makes_its_cgroups_again_after_they_were_removed():
    cgroups = PodCgroups.find(f"test-limits-{os.getpid()}", memory_max=256 << 20)
    if not cgroups.hierarchies:
        pytest.skip(f"no writable cgroups here: {cgroups.problem}")
    try:
        first = cgroups.pod("pod-a", 64)
        assert first and all(Path(f).exists() for f in first)
        cgroups.release("pod-a")
        for hierarchy in cgroups.hierarchies:
            os.rmdir(hierarchy.base)  # what another node's start does to an idle node's cgroups
        again = cgroups.pod("pod-b", 64)
        assert again and all(Path(f).exists() for f in again)
        assert (cgroups.pids / "pod-b" / "pids.max").read_text().strip() == "64"
        if cgroups.memory is not None:
            limit = cgroups.memory / ("memory.max" if (cgroups.memory / "memory.max").exists()
                                      else "memory.limit_in_bytes")
            assert int(limit.read_text()) == 256 << 20
    finally:
        cgroups.close()
