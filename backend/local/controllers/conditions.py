"""Status conditions as apimachinery's meta.SetStatusCondition keeps them: one per type, its
lastTransitionTime moved only when its status changes."""

from __future__ import annotations

from typing import Any

Condition = dict[str, Any]


def find(conditions: list[Condition] | None, kind: str, status: str | None = None) -> Condition | None:
    for condition in conditions or []:
        if condition.get("type") == kind and (status is None or condition.get("status") == status):
            return condition
    return None


def is_true(conditions: list[Condition] | None, kind: str) -> bool:
    return find(conditions, kind, "True") is not None


def set_condition(conditions: list[Condition], kind: str, status: str, reason: str, message: str, now: str,
                  only_if_true: bool = False) -> bool:
    """Set the condition of `kind` in place; True when something changed. `only_if_true`: a False
    condition is only recorded over an existing one (JobSet's updateCondition)."""
    current = find(conditions, kind)
    wanted = {"type": kind, "status": status, "reason": reason, "message": message}
    if current is None:
        if only_if_true and status != "True":
            return False
        conditions.append({**wanted, "lastTransitionTime": now})
        return True
    if current.get("status") != status:
        current.update(wanted, lastTransitionTime=now)
        return True
    if (current.get("reason"), current.get("message")) != (reason, message):
        current.update(wanted)
        return True
    return False
