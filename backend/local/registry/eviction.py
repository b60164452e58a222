"""pods/eviction (kubernetes pkg/registry/core/pod/storage/eviction.go): a delete that honours the
pod's PodDisruptionBudget, what `kubectl drain` asks for each pod of a node it empties.

- A pod that already caused its disruption (Succeeded, Failed, Pending, or being deleted) is
  deleted at once, no budget consulted.
- Otherwise its budget (the PDB of its namespace whose selector selects it; more than one is a
  500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not
  support.") must allow a disruption: one its controller has not observed yet (observedGeneration
  behind) or with disruptionsAllowed 0 answers 429 TooManyRequests, "Cannot evict pod as it would
  violate the pod's disruption budget." (kubectl drain retries every 5 s); one that allows it is
  decremented and the pod recorded in status.disruptedPods before the pod is deleted, so a second
  eviction meanwhile cannot pass too. A pod that is not Ready and the budget already healthy is
  deleted without spending one.
- The Eviction's deleteOptions (grace period, preconditions, dryRun) are the delete's.
"""

from __future__ import annotations

import copy
from typing import Any

from backend.local.registry import labels
from backend.local.registry.generic import Registry, rfc3339
from backend.local.registry.status import ApiError, bad_request

Obj = dict[str, Any]
MAX_DISRUPTED_PODS = 2000
VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _ignores_budget(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Pending") or \
        bool(pod["metadata"].get("deletionTimestamp"))


def _too_many_requests(message: str, cause: str, retry_after: int) -> ApiError:
    return ApiError(429, "TooManyRequests", message,
                    {"causes": [{"reason": "DisruptionBudget", "message": cause}], "retryAfterSeconds": retry_after})


def evict(registry: Registry, namespace: str, name: str, eviction: Obj) -> Obj:
    """Evict the pod; the Status answered (ApiError when refused)."""
    if (eviction.get("metadata") or {}).get("name") not in (None, name):
        raise bad_request("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions") or {}
    dry_run = options.get("dryRun") == ["All"]
    pods = registry.kinds.named("Pod")
    pod = registry.store.get(pods, namespace, name)
    if not _ignores_budget(pod):
        budgets = [b for b in registry.list("PodDisruptionBudget", namespace)
                   if not labels.empty((b.get("spec") or {}).get("selector"))
                   and labels.selects(b["spec"]["selector"], pod["metadata"].get("labels"))]
        if len(budgets) > 1:
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
                    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                               "does not support."}
        if budgets:
            _spend(registry, budgets[0], pod, dry_run)
    grace = options.get("gracePeriodSeconds")
    registry.delete(pods, namespace, name, grace, options.get("propagationPolicy"),
                    (options.get("preconditions") or {}).get("uid"), dry_run=dry_run)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _spend(registry: Registry, budget: Obj, pod: Obj, dry_run: bool) -> None:
    """checkAndDecrement: one disruption of the budget, or 429."""
    status, name = budget.get("status") or {}, budget["metadata"]["name"]
    if not _ready(pod) and int(status.get("currentHealthy", 0)) >= int(status.get("desiredHealthy", 0)) > 0:
        return  # not counted as healthy: its going costs the budget nothing
    if int(status.get("observedGeneration", 0)) < int(budget["metadata"].get("generation", 1)):
        raise _too_many_requests(VIOLATES, f"The disruption budget {name} is still being processed by the server.", 10)
    allowed = int(status.get("disruptionsAllowed", 0))
    if allowed < 0:
        raise ApiError(403, "Forbidden", f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions '
                                         "allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise ApiError(403, "Forbidden", f'poddisruptionbudgets.policy "{name}" is forbidden: DisruptedPods map too '
                                         "big - too many evictions not confirmed by PDB controller")
    if allowed == 0:
        raise _too_many_requests(VIOLATES, f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} "
                                           f"healthy pods and has {status.get('currentHealthy', 0)} currently", 0)
    if dry_run:
        return
    spent = copy.deepcopy(budget)
    spent_status = spent.setdefault("status", {})
    spent_status["disruptionsAllowed"] = allowed - 1
    spent_status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = rfc3339(registry.clock())
    if allowed - 1 == 0:
        conditions = [c for c in spent_status.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
        spent_status["conditions"] = conditions + [{
            "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
            "lastTransitionTime": rfc3339(registry.clock()),
            "observedGeneration": spent_status.get("observedGeneration")}]
    registry.update(registry.kinds.named("PodDisruptionBudget"), spent, budget["metadata"]["resourceVersion"],
                    subresource="status")
