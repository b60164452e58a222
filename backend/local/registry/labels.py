"""Structured selectors as objects carry them (apimachinery's metav1.LabelSelector and core/v1's
NodeSelector), matched against an object's labels: what a PodDisruptionBudget, a pod's node
affinity and a pod (anti-)affinity term select. The text form `-l a=b` is the API server's
(apiserver/selectors.py).

- LabelSelector: matchLabels AND matchExpressions (In, NotIn, Exists, DoesNotExist); an empty
  selector matches everything, a missing one nothing (LabelSelectorAsSelector).
- NodeSelector: its terms ORed, each term's requirements ANDed; In, NotIn, Exists,
  DoesNotExist, Gt, Lt on labels, and matchFields on metadata.name (NodeSelectorRequirementsAsSelector).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def _requirement(labels: dict[str, str], key: str, operator: str, values: list[str]) -> bool:
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        try:
            have, bound = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def selects(selector: Obj | None, labels: dict[str, str] | None) -> bool:
    """Whether a metav1.LabelSelector selects an object with these labels (None selects nothing)."""
    if selector is None:
        return False
    labels = labels or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_requirement(labels, e.get("key", ""), e.get("operator", ""), list(e.get("values") or []))
               for e in selector.get("matchExpressions") or [])


def empty(selector: Obj | None) -> bool:
    return not selector or not (selector.get("matchLabels") or selector.get("matchExpressions"))


def node_selector_matches(selector: Obj | None, node: Obj) -> bool:
    """Whether a core/v1 NodeSelector (required node affinity, a PV's nodeAffinity.required)
    admits the node: any of its terms; a term with no requirement admits none."""
    terms = (selector or {}).get("nodeSelectorTerms") or []
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    for term in terms:
        expressions, field_terms = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not expressions and not field_terms:
            continue
        if all(_requirement(labels, e.get("key", ""), e.get("operator", ""), list(e.get("values") or []))
               for e in expressions) and \
                all(_requirement(fields, e.get("key", ""), e.get("operator", ""), list(e.get("values") or []))
                    for e in field_terms):
            return True
    return False
