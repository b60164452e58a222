"""metav1.Table: the rows `kubectl get` prints, computed by the server as upstream does.

Core kinds get the columns of the built-in printers (pkg/printers/internalversion/printers.go);
custom resources get their CRD's additionalPrinterColumns (kinds.py), evaluated with the small
JSONPath subset those columns use. "date" cells are rendered as ages ("5m", "2d3h"), as the
CRD table convertor and the built-in printers do.
"""

from __future__ import annotations

import calendar
import re
import time
from typing import Any

from backend.local.apiserver import node_printers
from backend.local.registry.kinds import Column, Kind

_NAME = Column("Name", "string", ".metadata.name")


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    if seconds < -1:
        return "<invalid>"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 192:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    y = d // 365
    return f"{y}y{d % 365}d" if y < 8 and d % 365 else f"{y}y"


def age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = calendar.timegm(time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return "<unknown>"
    return human_duration(time.time() - then)


_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(-?\d*):?(-?\d*)\]|\[\?\(@\.([A-Za-z0-9_.]+)==\"([^\"]*)\"\)\]")


def json_path(obj: Any, path: str) -> Any:
    """The CRD printer-column subset of JSONPath: `.a.b`, `[-1:]`, `[0]`, `[?(@.type=="X")]`."""
    nodes: list[Any] = [obj]
    for match in _STEP.finditer(path):
        field, start, end, key, value = match.groups()
        next_nodes: list[Any] = []
        for node in nodes:
            if field is not None:
                if isinstance(node, dict) and field in node:
                    next_nodes.append(node[field])
            elif key is not None:
                if isinstance(node, list):
                    next_nodes += [i for i in node if isinstance(i, dict) and str(json_path(i, "." + key)) == value]
            elif isinstance(node, list):
                if ":" in match.group(0):
                    next_nodes += node[int(start) if start else None:int(end) if end else None]
                elif start:
                    index = int(start)
                    if -len(node) <= index < len(node):
                        next_nodes.append(node[index])
        nodes = next_nodes
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else nodes


# ------------------------------------------------------------------ built-in printers

def _pod_row(pod: dict[str, Any]) -> list[Any]:
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod["metadata"]
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for c in statuses:
        state = c.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal") else
                                            f"ExitCode:{term.get('exitCode', 0)}")
    if meta.get("deletionTimestamp"):
        reason = "Terminating"
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    if status.get("phase") == "Pending" and scheduled and scheduled.get("status") == "False":
        reason = "Pending"
    return [meta["name"], f"{ready}/{len(spec.get('containers') or [])}", reason, restarts,
            age(meta.get("creationTimestamp")), status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>", "<none>", "<none>"]


_POD = (_NAME, Column("Ready"), Column("Status"), Column("Restarts", "integer"), Column("Age"),
        Column("IP", priority=1), Column("Node", priority=1), Column("Nominated Node", priority=1),
        Column("Readiness Gates", priority=1))


def _event_row(event: dict[str, Any]) -> list[Any]:
    involved = event.get("involvedObject") or {}
    last = event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    return [age(last[:19] + "Z" if last and len(last) > 20 else last), event.get("type", ""),
            event.get("reason", ""), f"{(involved.get('kind') or '').lower()}/{involved.get('name', '')}",
            event.get("message", "")]


_PRINTERS: dict[str, tuple[tuple[Column, ...], Any]] = {
    "Pod": (_POD, _pod_row),
    "Namespace": ((_NAME, Column("Status"), Column("Age")),
                  lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", "Active"),
                             age(o["metadata"].get("creationTimestamp"))]),
    "Event": ((Column("Last Seen"), Column("Type"), Column("Reason"), Column("Object"), Column("Message")),
              _event_row),
    "PersistentVolumeClaim": (
        (_NAME, Column("Status"), Column("Volume"), Column("Capacity"), Column("Access Modes"),
         Column("StorageClass"), Column("VolumeAttributesClass"), Column("Age")),
        lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", "Pending"),
                   (o.get("spec") or {}).get("volumeName", ""),
                   ((o.get("status") or {}).get("capacity") or {}).get("storage", ""),
                   ",".join({"ReadWriteOnce": "RWO", "ReadWriteMany": "RWX", "ReadOnlyMany": "ROX",
                             "ReadWriteOncePod": "RWOP"}.get(m, m)
                            for m in (o.get("status") or {}).get("accessModes") or []),
                   (o.get("spec") or {}).get("storageClassName", ""), "<unset>",
                   age(o["metadata"].get("creationTimestamp"))]),
    "ConfigMap": ((_NAME, Column("Data", "integer"), Column("Age")),
                  lambda o: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                             age(o["metadata"].get("creationTimestamp"))]),
    "Secret": ((_NAME, Column("Type"), Column("Data", "integer"), Column("Age")),
               lambda o: [o["metadata"]["name"], o.get("type", "Opaque"), len(o.get("data") or {}),
                          age(o["metadata"].get("creationTimestamp"))]),
    "ServiceAccount": ((_NAME, Column("Secrets", "integer"), Column("Age")),
                       lambda o: [o["metadata"]["name"], len(o.get("secrets") or []),
                                  age(o["metadata"].get("creationTimestamp"))]),
    "StorageClass": ((_NAME, Column("Provisioner"), Column("ReclaimPolicy"), Column("VolumeBindingMode"),
                      Column("AllowVolumeExpansion"), Column("Age")),
                     lambda o: [o["metadata"]["name"] + (" (default)" if (o["metadata"].get("annotations") or {}).get(
                         "storageclass.kubernetes.io/is-default-class") == "true" else ""),
                                o.get("provisioner", ""), o.get("reclaimPolicy", "Delete"),
                                o.get("volumeBindingMode", "Immediate"),
                                str(o.get("allowVolumeExpansion", False)).lower(),
                                age(o["metadata"].get("creationTimestamp"))]),
}


_PRINTERS.update(node_printers.printers(age))


def _custom_row(columns: tuple[Column, ...], obj: dict[str, Any]) -> list[Any]:
    cells: list[Any] = [obj["metadata"]["name"]]
    for column in columns:
        value = json_path(obj, column.json_path)
        if column.type == "date":
            cells.append(age(value) if isinstance(value, str) else "<unknown>")
        elif value is None:
            cells.append("<none>" if column.type != "string" else "")
        elif isinstance(value, bool):
            cells.append(value if column.type == "boolean" else str(value).lower())
        else:
            cells.append(value if not isinstance(value, (dict, list)) else str(value))
    return cells


def _columns(kind: Kind) -> tuple[tuple[Column, ...], Any]:
    if kind.kind in _PRINTERS and kind.group in ("", "storage.k8s.io", "policy", "coordination.k8s.io"):
        return _PRINTERS[kind.kind]
    columns = kind.columns or (Column("Age", "date", ".metadata.creationTimestamp"),)
    return (_NAME,) + columns, lambda obj: _custom_row(columns, obj)


def _row_object(obj: dict[str, Any], include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def table(kind: Kind, objects: list[dict[str, Any]], resource_version: str, include: str = "Metadata",
          headers: bool = True) -> dict[str, Any]:
    columns, row = _columns(kind)
    definitions = [{"name": c.name, "type": "string" if c.type == "date" else c.type, "format": c.format,
                    "description": "", "priority": c.priority} for c in columns] if headers else []
    rows = []
    for obj in objects:
        entry: dict[str, Any] = {"cells": row(obj)}
        partial = _row_object(obj, include)
        if partial is not None:
            entry["object"] = partial
        rows.append(entry)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": definitions, "rows": rows}
