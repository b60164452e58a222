"""What each of a TrainJob's `runtimePatches` changed in its runtime: the runtime's template with
the patches applied in order, as the Trainer does (kubeflow/trainer v2.3.0
pkg/runtime/core/trainingruntime.go `mergeRuntimePatches`: a strategic merge of each patch's
`template.spec` into the JobSet spec; `newRuntimeInfo`: its `template.metadata` labels and
annotations over the runtime's), recorded field by field as a diff per manager.

Lists of the core types merge by their patchMergeKey (a container, an env variable or a volume
by name, a mount by its path), as strategicpatch does; any other list is replaced whole.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from backend.anatomy.model import Change, PatchDiff

# patchMergeKey of the lists a runtime patch reaches (k8s.io/api core/v1 types.go tags; JobSet's
# replicatedJobs by name, as the Trainer merges them).
MERGE_KEYS = {"replicatedJobs": "name", "containers": "name", "initContainers": "name", "env": "name",
              "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort"}
POD_SPEC = ".template.spec.template.spec"  # a replicated job's pod spec, written "pod" in a path


def shown(value: Any) -> str | None:
    """A field's value in one line: strings as they are, the rest as compact JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def patch_diffs(runtime: dict | None, patches: list[dict]) -> tuple[PatchDiff, ...]:
    """Per manager, in the order the Trainer applies them, what its patch changed of the runtime's
    `spec.template` (and of what earlier patches left)."""
    current = copy.deepcopy(((runtime or {}).get("spec") or {}).get("template") or {})
    diffs = []
    for patch in patches:
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        changes: list[Change] = []
        current = _apply(current, template, "template", changes)
        diffs.append(PatchDiff(str(patch.get("manager") or "?"), tuple(changes)))
    return tuple(diffs)


def _apply(target: Any, patch: Any, path: str, changes: list[Change]) -> Any:
    """`target` with `patch` merged into it; each field that differs after is added to `changes`."""
    if not isinstance(patch, dict):
        if target != patch:
            changes.append(Change(_short(path), shown(target), shown(patch)))
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        where = f"{path}.{key}"
        if value is None:  # a strategic merge patch's null deletes the field
            if key in merged:
                changes.append(Change(_short(where), shown(merged.pop(key)), None))
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(merged.get(key), list):
            merged[key] = _apply_list(merged[key], value, MERGE_KEYS[key], where, changes)
        else:
            merged[key] = _apply(merged.get(key), value, where, changes)
    return merged


def _apply_list(items: list, patch: list, key: str, path: str, changes: list[Change]) -> list:
    merged = list(items)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            continue  # the API server refuses such a patch; nothing of it reaches a pod
        where = f"{path}[{item[key]}]"
        index = next((i for i, old in enumerate(merged) if isinstance(old, dict) and old.get(key) == item[key]), None)
        if index is None:
            changes.append(Change(_short(where), None, shown(item)))
            merged.append(copy.deepcopy(item))
        else:
            merged[index] = _apply(merged[index], item, where, changes)
    return merged


def _short(path: str) -> str:
    """'template.spec.replicatedJobs[node].template.spec.template.spec.volumes[x]' as
    'replicatedJobs[node] pod.volumes[x]': the part a person reads."""
    path = path.removeprefix("template.spec.")
    return path.replace(POD_SPEC + ".", " pod.").replace(POD_SPEC, " pod")
