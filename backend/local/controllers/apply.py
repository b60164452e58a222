"""Kubeflow Trainer's pkg/apply Upsert* (UpsertEnvVars, UpsertVolumeMounts, UpsertVolumes): items
merged into a list by name, one already there replaced where it stands, a new one appended; what
the runtime plugins (trainjob.py's torch and jobset parts, trainjob_status.py) use to add to a
container or a pod spec."""

from __future__ import annotations

import copy

from backend.local.registry.strategy import Obj


def upsert(items: list[Obj], new: list[Obj], key: str = "name") -> list[Obj]:
    merged = list(items)
    for item in new:
        at = next((i for i, old in enumerate(merged) if old.get(key) == item.get(key)), None)
        if at is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[at] = copy.deepcopy(item)
    return merged
