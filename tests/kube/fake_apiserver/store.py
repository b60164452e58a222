"""The fake's state: objects by collection, one resourceVersion counter, the history of changes
every watch replays from, and pod logs. One Condition guards it all and is notified on every
change, so a stream waiting on it wakes at once (no polling).

Methods without an underscore are what a test (or a controller it plays) calls; the underscored
ones are for the verbs, called with the lock held.
"""

from __future__ import annotations

import copy
import threading
import uuid
from dataclasses import dataclass, field
from typing import Callable

from tests.kube.fake_apiserver.served import PODS, SERVED, api_version, now_rfc3339


@dataclass
class PodLog:
    lines: list[tuple[str, str]] = field(default_factory=list)  # (timestamp, text)
    closed: bool = False  # the container ended: followed streams finish
    cut: bool = False  # followed streams end now, without what was appended since they last sent


class Store:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rv = 1000
        self.objects: dict[tuple[str, str], dict[tuple[str, str], dict]] = {key: {} for key in SERVED}
        self.served = set(SERVED)  # a test removes a collection to play a cluster without it
        self.history: list[tuple[int, tuple[str, str], str, dict]] = []  # (version, key, event type, object)
        self.logs: dict[tuple[str, str], PodLog] = {}
        self.stopping = False  # the server is shutting down: every stream ends

    # ------------------------------------------------------------------ what tests change

    def put(self, key: tuple[str, str], obj: dict, namespace: str = "default") -> dict:
        """Create or replace an object (as a controller would); one event, a new version."""
        with self.cond:
            return self._store(key, copy.deepcopy(obj), namespace)

    def update(self, key: tuple[str, str], name: str, change: Callable[[dict], None],
               namespace: str = "default") -> dict:
        with self.cond:
            obj = copy.deepcopy(self.objects[key][(self._ns(key, namespace), name)])
            change(obj)
            return self._store(key, obj, namespace)

    def remove(self, key: tuple[str, str], name: str, namespace: str = "default") -> dict | None:
        with self.cond:
            return self._remove(key, self._ns(key, namespace), name)

    def get(self, key: tuple[str, str], name: str, namespace: str = "default") -> dict | None:
        with self.cond:
            return copy.deepcopy(self.objects[key].get((self._ns(key, namespace), name)))

    def names(self, key: tuple[str, str]) -> list[str]:
        with self.cond:
            return sorted(name for _, name in self.objects[key])

    def append_log(self, pod: str, *texts: str, namespace: str = "default") -> None:
        with self.cond:
            log = self.logs.setdefault((namespace, pod), PodLog())
            log.lines.extend((now_rfc3339(), text) for text in texts)
            self.cond.notify_all()

    def close_log(self, pod: str, namespace: str = "default") -> None:
        """The container ended: followed streams of this log finish."""
        with self.cond:
            self.logs.setdefault((namespace, pod), PodLog()).closed = True
            self.cond.notify_all()

    def end_with_lines_unsent(self, pod: str, *texts: str, namespace: str = "default") -> None:
        """The container prints its last lines and ends, and its followed streams end before they
        send them (a server's follow that ended early; the lines are in the log)."""
        with self.cond:
            log = self.logs.setdefault((namespace, pod), PodLog())
            log.lines.extend((now_rfc3339(), text) for text in texts)
            log.closed = log.cut = True
            self.cond.notify_all()

    def restart_container(self, pod: str, namespace: str = "default") -> None:
        """The container restarts in place (restartPolicy OnFailure): its old log stream ends,
        a new, empty log begins and restartCount goes up."""
        with self.cond:
            old = self.logs.setdefault((namespace, pod), PodLog())
            self.logs[(namespace, pod)] = PodLog()
            old.closed = True
            obj = copy.deepcopy(self.objects[PODS][(namespace, pod)])
            for container in obj["status"].get("containerStatuses") or []:
                container["restartCount"] = int(container.get("restartCount") or 0) + 1
            self._store(PODS, obj, namespace)

    # ------------------------------------------------------------------ the verbs' side (lock held)

    def _ns(self, key: tuple[str, str], namespace: str) -> str:
        return namespace if SERVED[key][1] else ""

    def _next(self) -> int:
        self.rv += 1
        return self.rv

    def _store(self, key: tuple[str, str], obj: dict, namespace: str) -> dict:
        meta = obj.setdefault("metadata", {})
        ns = self._ns(key, meta.get("namespace") or namespace)
        if ns:
            meta["namespace"] = ns
        old = self.objects[key].get((ns, meta["name"]))
        meta.setdefault("uid", (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", (old or {}).get("metadata", {}).get("creationTimestamp")
                        or now_rfc3339())
        kind, _ = SERVED[key]
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", api_version(key))
        meta["resourceVersion"] = str(self._next())
        self.objects[key][(ns, meta["name"])] = obj
        self.history.append((self.rv, key, "MODIFIED" if old else "ADDED", copy.deepcopy(obj)))
        self.cond.notify_all()
        return copy.deepcopy(obj)

    def _remove(self, key: tuple[str, str], ns: str, name: str) -> dict | None:
        obj = self.objects[key].pop((ns, name), None)
        if obj is None:
            return None
        obj["metadata"]["resourceVersion"] = str(self._next())
        self.history.append((self.rv, key, "DELETED", copy.deepcopy(obj)))
        if key == PODS:
            self.logs.setdefault((ns, name), PodLog()).closed = True
        self.cond.notify_all()
        return obj
