"""Label and field selectors, with the syntax and errors of k8s.io/apimachinery labels/fields.

Labels: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>5`, `a<5` (selector.go's
GreaterThan and LessThan: the label's value and the bound both integers), comma-joined (AND).
Fields: `path=value`, `path==value`, `path!=value`, only on the paths each kind supports (as
upstream: metadata.name and metadata.namespace everywhere, plus a few per kind).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from backend.local.registry.status import bad_request

Matcher = Callable[[dict[str, Any]], bool]

_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SET = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\(([^)]*)\)\s*$")

# Field selectors each kind accepts beyond metadata.name / metadata.namespace (pkg/registry/*/strategy.go).
FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
              "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
              "reason", "reportingComponent", "source", "type"),
    "Namespace": ("status.phase",),
    "Secret": ("type",),
    "Node": ("spec.unschedulable",),
}


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def _check_key(key: str, text: str) -> str:
    if not _KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise bad_request(f'unable to parse requirement: invalid label key "{key}" in selector "{text}"')
    return key


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise bad_request(f'unable to parse requirement: invalid label value: "{value}" in selector "{text}"')
    return value


def _integer(value: str, text: str) -> int:
    try:
        return int(value, 10)
    except ValueError:
        raise bad_request(f'unable to parse requirement: values[0]: Invalid value: "{value}": for \'Gt\', \'Lt\' '
                          f'operators, the value must be an integer in selector "{text}"') from None


def _compare(key: str, op: str, bound: int) -> Callable[[dict[str, str]], bool]:
    """Requirement.Matches for Gt and Lt: a label that is absent or not an integer never matches."""
    def test(labels: dict[str, str]) -> bool:
        try:
            have = int(labels[key], 10)
        except (KeyError, ValueError):
            return False
        return have > bound if op == ">" else have < bound
    return test


def label_matcher(text: str | None) -> Matcher:
    if not text:
        return lambda obj: True
    tests: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_terms(text):
        found = _SET.match(term)
        if found:
            key, op, values = found.group(1), found.group(2), found.group(3)
            _check_key(key, text)
            allowed = {_check_value(v.strip(), text) for v in values.split(",") if v.strip()}
            if op == "in":
                tests.append(lambda labels, k=key, a=allowed: labels.get(k) in a)
            else:
                tests.append(lambda labels, k=key, a=allowed: labels.get(k) not in a)
            continue
        for op in ("!=", "==", "=", ">", "<"):
            if op in term:
                key, value = (part.strip() for part in term.split(op, 1))
                _check_key(key, text)
                _check_value(value, text)
                if op in (">", "<"):
                    tests.append(_compare(key, op, _integer(value, text)))
                elif op == "!=":
                    tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
                else:
                    tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
                break
        else:
            if term.startswith("!"):
                key = _check_key(term[1:].strip(), text)
                tests.append(lambda labels, k=key: k not in labels)
            else:
                key = _check_key(term, text)
                tests.append(lambda labels, k=key: k in labels)
    return lambda obj: all(test((obj.get("metadata") or {}).get("labels") or {}) for test in tests)


def field_value(obj: dict[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def field_matcher(text: str | None, kind: str) -> Matcher:
    if not text:
        return lambda obj: True
    allowed = ("metadata.name", "metadata.namespace") + FIELDS.get(kind, ())
    tests: list[Matcher] = []
    for term in _split_terms(text):
        for op in ("!=", "==", "="):
            if op in term:
                path, value = (part.strip() for part in term.split(op, 1))
                break
        else:
            raise bad_request(f'invalid selector: "{text}"; can\'t understand "{term}"')
        if path not in allowed:
            raise bad_request(f'field label not supported: {path}')
        negate = op == "!="
        tests.append(lambda obj, p=path, v=value, n=negate: (field_value(obj, p) == v) != n)
    return lambda obj: all(test(obj) for test in tests)
