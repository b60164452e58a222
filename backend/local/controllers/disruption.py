"""The disruption controller (kubernetes pkg/controller/disruption/disruption.go): a
PodDisruptionBudget's status, which the eviction subresource spends (registry/eviction.py).

For a budget with `minAvailable` as a number: the pods it selects in its namespace are expected,
`minAvailable` of them must stay healthy (Ready, not being deleted, not just evicted: an entry of
status.disruptedPods younger than 2 minutes), and disruptionsAllowed is how many more than that
are healthy, with the DisruptionAllowed condition (SufficientPods or InsufficientPods) and
observedGeneration. `maxUnavailable` and a percentage need the expected count from the pods'
controllers' scale subresource; a Job has none, so such a budget is SyncFailed with no disruption
allowed, as upstream reports it for pods whose controllers it cannot scale.
"""

from __future__ import annotations

import calendar
import copy
import time
from typing import Callable, Hashable

from backend.local.controllers import conditions
from backend.local.controllers.base import Controller, namespaced_key
from backend.local.registry import labels
from backend.local.registry.client import Client
from backend.local.registry.strategy import Obj

DELETION_TIMEOUT = 120.0  # seconds an eviction's entry in disruptedPods counts before it is dropped


def _healthy(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and \
        conditions.is_true((pod.get("status") or {}).get("conditions"), "Ready")


class DisruptionController(Controller):
    name = "disruption-controller"

    def __init__(self, client: Client, clock: Callable[[], float] = time.time):
        super().__init__(client)
        self.clock = clock
        self.budgets = self.inform("PodDisruptionBudget", lambda _t, b, _o: self.queue.add(namespaced_key(b)))
        self.inform("Pod", self._pod_changed)

    def _pod_changed(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        for budget in self.budgets.items():
            if budget["metadata"].get("namespace") == pod["metadata"].get("namespace") and \
                    labels.selects((budget.get("spec") or {}).get("selector"), pod["metadata"].get("labels")):
                self.queue.add(namespaced_key(budget))

    async def reconcile(self, key: Hashable) -> float | None:
        namespace, name = key
        budget = self.client.get("PodDisruptionBudget", namespace, name)
        if budget is None:
            return None
        spec, before = budget.get("spec") or {}, copy.deepcopy(budget.get("status") or {})
        status = budget.setdefault("status", {})
        selector = spec.get("selector")
        pods = [] if labels.empty(selector) else self.client.list(
            "Pod", namespace, match=lambda p: labels.selects(selector, p["metadata"].get("labels")))
        now, again = self.clock(), None
        disrupted = {}
        for pod_name, stamp in (status.get("disruptedPods") or {}).items():
            try:
                until = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) + DELETION_TIMEOUT
            except ValueError:
                continue
            if until > now and any(p["metadata"]["name"] == pod_name and not p["metadata"].get("deletionTimestamp")
                                   for p in pods):
                disrupted[pod_name] = stamp
                again = min(again or until - now, until - now)
        healthy = sum(1 for p in pods if _healthy(p) and p["metadata"]["name"] not in disrupted)
        minimum = spec.get("minAvailable")
        if isinstance(minimum, int):
            desired, failure = minimum, ""
        else:
            desired, failure = 0, (f'found no controllers for pod "{pods[0]["metadata"]["name"]}"' if pods else "")
        allowed = 0 if failure else max(0, healthy - desired)
        status.update(currentHealthy=healthy, desiredHealthy=desired, expectedPods=len(pods),
                      disruptionsAllowed=allowed, observedGeneration=budget["metadata"].get("generation", 1))
        if disrupted:
            status["disruptedPods"] = disrupted
        else:
            status.pop("disruptedPods", None)
        reason = "SyncFailed" if failure else "SufficientPods" if allowed else "InsufficientPods"
        conditions.set_condition(status.setdefault("conditions", []), "DisruptionAllowed",
                                 "True" if allowed else "False", reason, failure, self.client.now())
        if status != before:
            self.client.update_status("PodDisruptionBudget", budget)
        return again
