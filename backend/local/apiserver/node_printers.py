"""The built-in printers (pkg/printers/internalversion/printers.go) of the kinds several nodes bring:
Node (STATUS from its Ready condition and spec.unschedulable, ROLES from its node-role labels),
PersistentVolume, PodDisruptionBudget and Lease. tables.py serves them beside the others."""

from __future__ import annotations

from typing import Any

from backend.local.registry.kinds import Column

Obj = dict[str, Any]
_NAME = Column("Name", "string", ".metadata.name")
_MODES = {"ReadWriteOnce": "RWO", "ReadWriteMany": "RWX", "ReadOnlyMany": "ROX", "ReadWriteOncePod": "RWOP"}


def node_status(node: Obj) -> str:
    """printNode's STATUS: Ready, NotReady (False or Unknown) or Unknown (no condition), and
    SchedulingDisabled when cordoned."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    status = ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    if (node.get("spec") or {}).get("unschedulable"):
        status.append("SchedulingDisabled")
    return ",".join(status)


def node_roles(node: Obj) -> str:
    roles = [key.split("/", 1)[1] for key in node["metadata"].get("labels") or {}
             if key.startswith("node-role.kubernetes.io/") and key.split("/", 1)[1]]
    roles += [v for k, v in (node["metadata"].get("labels") or {}).items() if k == "kubernetes.io/role" and v]
    return ",".join(sorted(roles)) or "<none>"


def printers(age) -> dict[str, tuple[tuple[Column, ...], Any]]:
    """Kind -> (columns, row of an object); `age` renders a creationTimestamp as tables.py does."""
    def node_row(o: Obj) -> list[Any]:
        info = (o.get("status") or {}).get("nodeInfo") or {}
        internal = next((a.get("address") for a in (o.get("status") or {}).get("addresses") or []
                         if a.get("type") == "InternalIP"), "<none>")
        return [o["metadata"]["name"], node_status(o), node_roles(o), age(o["metadata"].get("creationTimestamp")),
                info.get("kubeletVersion", ""), internal, "<none>", info.get("osImage", ""),
                info.get("kernelVersion", ""), info.get("containerRuntimeVersion", "")]

    def volume_row(o: Obj) -> list[Any]:
        spec, claim = o.get("spec") or {}, (o.get("spec") or {}).get("claimRef") or {}
        return [o["metadata"]["name"], (spec.get("capacity") or {}).get("storage", ""),
                ",".join(_MODES.get(m, m) for m in spec.get("accessModes") or []),
                spec.get("persistentVolumeReclaimPolicy", "Retain"), (o.get("status") or {}).get("phase", "Pending"),
                f"{claim.get('namespace')}/{claim.get('name')}" if claim else "", spec.get("storageClassName", ""),
                "<unset>", (o.get("status") or {}).get("reason", ""), age(o["metadata"].get("creationTimestamp")),
                spec.get("volumeMode", "Filesystem")]

    def budget_row(o: Obj) -> list[Any]:
        spec = o.get("spec") or {}
        return [o["metadata"]["name"], str(spec["minAvailable"]) if "minAvailable" in spec else "N/A",
                str(spec["maxUnavailable"]) if "maxUnavailable" in spec else "N/A",
                int((o.get("status") or {}).get("disruptionsAllowed", 0)), age(o["metadata"].get("creationTimestamp"))]

    return {
        "Node": ((_NAME, Column("Status"), Column("Roles"), Column("Age"), Column("Version"),
                  Column("Internal-IP", priority=1), Column("External-IP", priority=1),
                  Column("OS-Image", priority=1), Column("Kernel-Version", priority=1),
                  Column("Container-Runtime", priority=1)), node_row),
        "PersistentVolume": ((_NAME, Column("Capacity"), Column("Access Modes"), Column("Reclaim Policy"),
                              Column("Status"), Column("Claim"), Column("StorageClass"),
                              Column("VolumeAttributesClass"), Column("Reason"), Column("Age"),
                              Column("VolumeMode", priority=1)), volume_row),
        "PodDisruptionBudget": ((_NAME, Column("Min Available"), Column("Max Unavailable"),
                                 Column("Allowed Disruptions", "integer"), Column("Age")), budget_row),
        "Lease": ((_NAME, Column("Holder"), Column("Age")),
                  lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity", ""),
                             age(o["metadata"].get("creationTimestamp"))]),
    }
