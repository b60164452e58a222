"""How two versions of an object merge, as apimachinery's strategicpatch and JSON merge patch
(RFC 7386) do it: lists of the core types merged by their patchMergeKey, `$patch` directives.
The API server's PATCH bodies use it (apiserver/patch.py), and so do controllers that build an
object from a template and patches of it (the Trainer's runtimePatches).
"""

from __future__ import annotations

import copy
from typing import Any

from backend.local.registry.status import bad_request

# patchMergeKey of the lists in core/v1 and meta/v1 types (k8s.io/api/core/v1/types.go tags).
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
              "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort",
              "imagePullSecrets": "name", "conditions": "type", "ownerReferences": "uid",
              "volumeDevices": "devicePath", "hostAliases": "ip", "replicatedJobs": "name"}


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):  # $setElementOrder, $retainKeys: order and retention hints
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
        else:
            result[key] = strategic_merge(result.get(key), value)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"strategic merge patch: an item of a list merged by {merge_key!r} lacks that key")
        index = next((i for i, old in enumerate(merged)
                      if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged


