"""List-then-watch of one kind of object, as a client-go reflector does it, never a polling loop.

List once (the current state, and the resourceVersion it is valid at), then watch from that
resourceVersion with bookmarks. A stream that ends (the server's timeout), drops (a broken
connection) or goes silent (no byte for `read_timeout` seconds) is reopened from the last
resourceVersion seen, so nothing is missed and nothing is repeated. When the server no longer
has that version (410 Gone, as an ERROR event or as the HTTP status) the watcher lists again and
emits the difference between the new list and what it had seen: ADDED for new objects,
MODIFIED for changed ones, DELETED for vanished ones. Objects are keyed by uid, so a pod
recreated under the same name is a DELETED and an ADDED, never a MODIFIED. After the first list
the watcher emits one SYNCED event (no object): from there on the consumer has the full state.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable

from backend.kube.connection import CALL_TIMEOUT, CONNECT_TIMEOUT, Connection
from backend.kube.threads import Halt

# Seconds without a byte (not even a bookmark) after which a watch stream counts as dead.
DEFAULT_READ_TIMEOUT = 90.0


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED; SYNCED once, after the first list
    object: dict


def object_key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def resource_version(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion", "")


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class ListWatch:
    """A producer for `threads.iterate_in_thread`: emits WatchEvents of the objects a list call
    returns (a `kubernetes` client list method plus its positional arguments)."""

    def __init__(self, conn: Connection, list_call: Callable[..., Any], *args: Any,
                 label_selector: str | None = None, field_selector: str | None = None,
                 read_timeout: float = DEFAULT_READ_TIMEOUT, what: str = "", missing: str = "") -> None:
        self.conn = conn
        self.list_call = list_call
        self.args = args
        self.selectors = {k: v for k, v in (("label_selector", label_selector),
                                            ("field_selector", field_selector)) if v}
        self.read_timeout = read_timeout
        self.what = what
        self.missing = missing  # the message when the server does not serve this kind at all
        self.known: dict[str, dict] = {}
        self.watches_since_list = 0

    def __call__(self, emit: Callable[[WatchEvent], None], halt: Halt) -> None:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        self.version: str | None = None  # advanced by every event and bookmark, kept on errors
        listed_once = False
        failures = 0
        while not halt.is_set():
            try:
                if self.version is None:
                    self.version = self._relist(emit)
                    if not listed_once:
                        emit(WatchEvent("SYNCED", {}))
                    listed_once = True
                lines = self._watch(emit, halt)
                # A stream that carried something is reopened at once; an empty one (a server
                # that closes at once) after a growing pause, so nothing spins.
                failures = 0 if lines else failures + 1
            except (_Gone, ApiException) as exc:
                if isinstance(exc, ApiException) and exc.status != 410:
                    if not listed_once or exc.status in (401, 403, 404):
                        raise self._error(exc) from None
                    failures += 1
                else:
                    # Gone: list again. Gone on the first watch after a list means the server is
                    # unwell: pause before listing again.
                    failures = failures + 1 if self.watches_since_list <= 1 else 0
                    self.version = None
            except (HTTPError, OSError, ValueError) as exc:
                if halt.is_set():
                    return
                if self.conn.reconnect(exc):  # the embedded cluster, started again: resume
                    continue
                if not listed_once:
                    raise self._error(exc) from None
                failures += 1
            if failures and halt.wait(min(5.0, 0.1 * 2 ** failures)):
                return

    def _error(self, exc: BaseException) -> BaseException:
        from backend.kube.connection import MissingType

        error = self.conn.translate(exc, self.what)
        if isinstance(error, MissingType) and self.missing:
            return MissingType(self.missing)
        return error

    def _relist(self, emit: Callable[[WatchEvent], None]) -> str:
        response = self.list_call(*self.args, **self.selectors, _preload_content=False,
                                  _request_timeout=(CONNECT_TIMEOUT, CALL_TIMEOUT))
        body = json.loads(response.data)
        fresh = {object_key(o): o for o in body.get("items") or []}
        for key, obj in fresh.items():
            old = self.known.get(key)
            if old is None:
                emit(WatchEvent("ADDED", obj))
            elif resource_version(old) != resource_version(obj):
                emit(WatchEvent("MODIFIED", obj))
        for key in [k for k in self.known if k not in fresh]:
            emit(WatchEvent("DELETED", self.known[key]))
        self.known = fresh
        self.watches_since_list = 0
        return (body.get("metadata") or {}).get("resourceVersion", "")

    def _watch(self, emit: Callable[[WatchEvent], None], halt: Halt) -> int:
        """One watch request from self.version; returns how many lines it carried."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.watch.watch import iter_resp_lines

        self.watches_since_list += 1
        response = self.list_call(
            *self.args, **self.selectors, watch=True, resource_version=self.version,
            allow_watch_bookmarks=True, timeout_seconds=random.randint(300, 600),
            _preload_content=False, _request_timeout=(CONNECT_TIMEOUT, self.read_timeout),
        )
        lines = 0
        with halt.track(response):
            for line in iter_resp_lines(response):
                lines += 1
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone()
                    raise ApiException(status=obj.get("code") or 500, reason=obj.get("message", ""))
                if kind != "BOOKMARK":
                    self._apply(kind, obj, emit)
                self.version = resource_version(obj) or self.version
                if halt.is_set():
                    break
        return lines

    def _apply(self, kind: str, obj: dict, emit: Callable[[WatchEvent], None]) -> None:
        key = object_key(obj)
        old = self.known.get(key)
        if kind == "DELETED":
            if old is not None:  # else a re-list already reported it
                del self.known[key]
                emit(WatchEvent("DELETED", obj))
            return
        if old is not None and resource_version(old) == resource_version(obj):
            return  # already seen (replayed after a reconnect)
        self.known[key] = obj
        emit(WatchEvent("ADDED" if old is None else "MODIFIED", obj))
