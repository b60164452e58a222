"""Kubernetes resource quantities ("500m", "2Gi", "1e3") as numbers: apimachinery's
resource.Quantity suffixes, decimal and binary; what a pod requests of a node and what a node
offers, in those numbers (the scheduler's NodeResourcesFit and the cockpit's nodes view count
alike); and a number of bytes as text. Imports nothing, so the CLI can check a
`--cpus`/`--memory` before anything heavy loads."""

from __future__ import annotations

import re
from collections import Counter

_SUFFIX = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "m": 1e-3, "u": 1e-6, "n": 1e-9}  # metrics-server reports CPU in nanocores ("1500000n")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m|u|n)?$")


def quantity(value: str | int | float | None) -> float:
    """A Kubernetes resource quantity ("500m", "1", "2Gi", "1e3") as a number (0 when unset)."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    found = _QUANTITY.match(str(value).strip())
    if not found:
        raise ValueError(f"quantities must match the regular expression '{_QUANTITY.pattern}' (got {value!r})")
    return float(found.group(1)) * _SUFFIX[found.group(2) or ""]


def requests_of(pod: dict) -> dict[str, float]:
    """What a pod asks of a node: its containers' requests (limits for those not requested)."""
    total: Counter[str] = Counter()
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in asked.items():
            total[name] += quantity(value)
    return dict(total)


def allocatable(node: dict) -> dict[str, float]:
    return {k: quantity(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}


def size_text(n: float) -> str:
    """A number of bytes for a person: "512 B", "3.0 MiB", "1.2 GiB"."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            break
        value /= 1024
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
