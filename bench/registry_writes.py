"""What managedFields cost a write, measured in one invocation against the registry without them.

A running pod's status update (a kubelet's or controller's most frequent write) through the
in-process registry: as it is (managedFields kept as kube-apiserver keeps them, objects copied
by values.copied), with the bookkeeping turned off, and as the registry was before managedFields
(no bookkeeping, copy.deepcopy: the baseline); and one copy of a stored pod by values.copied
against copy.deepcopy. Medians of rounds; goals: a status write at most 1.5x the baseline's, a
copy at least 3x faster than deepcopy.

    .venv/bin/python bench/registry_writes.py [--rounds 5] [--writes 300]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.local.registry import client, generic, managed_fields, store  # noqa: E402
from backend.local.registry.values import copied  # noqa: E402
from tests.controlplane import plane  # noqa: E402

POD = {"metadata": {"name": "p", "namespace": "default", "labels": {"app": "lesson"}},
       "spec": {"containers": [{"name": "node", "image": "kfcockpit-base", "command": ["torchrun", "-m", "x"],
                                "env": [{"name": f"PET_{i}", "value": str(i)} for i in range(20)],
                                "volumeMounts": [{"name": "checkpoints", "mountPath": "/checkpoints"}],
                                "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}}}],
                "volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}}]}}


def status_writes(writes: int) -> float:
    """Seconds per status update of a pod."""
    client = plane()
    client.create("Pod", POD)
    start = time.perf_counter()
    for i in range(writes):
        pod = client.get("Pod", "default", "p")
        pod.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True" if i % 2 else "False"}]
        client.update_status("Pod", pod)
    return (time.perf_counter() - start) / writes


def variant(bookkeeping: bool, copy_with) -> tuple:
    """The registry's record_update and copy swapped for a round; the originals to restore."""
    kept = (managed_fields.record_update, [(m, m.copied) for m in (client, generic, managed_fields, store)])
    if not bookkeeping:
        managed_fields.record_update = lambda *a, **k: None
    for module, _ in kept[1]:
        module.copied = copy_with
    return kept


def restore(kept: tuple) -> None:
    managed_fields.record_update = kept[0]
    for module, original in kept[1]:
        module.copied = original


def copies(obj: dict, copy_once, count: int = 2000) -> float:
    start = time.perf_counter()
    for _ in range(count):
        copy_once(obj)
    return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writes", type=int, default=300)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"with managedFields": [], "without": [], "before (deepcopy, none)": []}
    ratios = []
    for _ in range(args.rounds):
        for name, bookkeeping, copy_with in (("with managedFields", True, copied), ("without", False, copied),
                                             ("before (deepcopy, none)", False, copy.deepcopy)):
            kept = variant(bookkeeping, copy_with)
            try:
                rows[name].append(status_writes(args.writes))
            finally:
                restore(kept)
        ratios.append(rows["with managedFields"][-1] / rows["before (deepcopy, none)"][-1])
    stored = plane().create("Pod", POD)
    copy_ratio = statistics.median(copies(stored, copy.deepcopy) / copies(stored, copied) for _ in range(args.rounds))
    ratio = statistics.median(ratios)
    shown = ", ".join(f"{name} {statistics.median(times) * 1e6:.0f} us" for name, times in rows.items())
    print(f"a pod's status write: {shown}; with managedFields / before: {ratio:.2f}x (goal <= 1.5)")
    print(f"copy of a stored pod: {copy_ratio:.1f}x faster than copy.deepcopy (goal >= 3.0)")


if __name__ == "__main__":
    main()
