"""Events as client-go's event recorder writes them: a core/v1 Event per thing that happened to an
object, in its namespace ("default" for a cluster-scoped one), named `<object>.<hex time>`.

The same event again (same object, type, reason, message and component) counts up and moves
its lastTimestamp instead of adding another, as the recorder's correlator aggregates repeats.
Events are this run's history: not kept across restarts (upstream keeps an hour's), and only
the newest `KEPT` are kept, the oldest deleted first.
"""

from __future__ import annotations

import socket
import time
from collections import OrderedDict
from typing import Protocol

from backend.local.registry.client import Client
from backend.local.registry.strategy import Obj

KEPT = 2000


class Record(Protocol):
    def __call__(self, involved: Obj, event_type: str, reason: str, message: str) -> None: ...


class Events:
    def __init__(self, client: Client, host: str | None = None):
        self.client = client
        self.host = host or socket.gethostname()
        self._names: OrderedDict[tuple, tuple[str, str]] = OrderedDict()  # correlation key -> (ns, name)

    def recorder(self, component: str) -> Record:
        """The `record(involved, type, reason, message)` of one component (a controller, a kubelet)."""
        def record(involved: Obj, event_type: str, reason: str, message: str) -> None:
            self._record(component, involved, event_type, reason, message)
        return record

    def _record(self, component: str, involved: Obj, event_type: str, reason: str, message: str) -> None:
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        key = (meta.get("uid", ""), event_type, reason, message, component)
        now = self.client.now()
        known = self._names.get(key)
        if known is not None:
            def again(event: Obj) -> None:
                event["count"] = int(event.get("count") or 1) + 1
                event["lastTimestamp"] = now
            if self.client.mutate("Event", *known, again) is not None:
                self._names.move_to_end(key)
                return
        name = f"{meta['name']}.{time.time_ns():x}"
        self.client.create("Event", {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"kind": involved.get("kind", ""), "apiVersion": involved.get("apiVersion", ""),
                               "name": meta["name"], "namespace": meta.get("namespace") or "",
                               "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": event_type, "count": 1,
            "source": {"component": component, "host": self.host},
            "firstTimestamp": now, "lastTimestamp": now, "reportingComponent": component,
            "reportingInstance": self.host})
        self._names[key] = (namespace, name)
        while len(self._names) > KEPT:
            _, (old_ns, old_name) = self._names.popitem(last=False)
            self.client.delete("Event", old_ns, old_name)
