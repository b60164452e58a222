"""Objects, resourceVersions and the watch cache, as an API server keeps them over etcd.

Every write takes the next resourceVersion (one counter for all kinds, as etcd's revision) and
appends an event to a bounded history. A watch from version N replays the history after N; once
N is older than the history holds, the watch is told 410 Gone and the client lists again (what
client-go's reflector and kubectl do). The counter is persisted (revision.py), so versions keep
increasing across controller restarts and clock changes, and a version handed out by an earlier
controller is always "too old", never silently reused.

Stored objects are never mutated: a write stores a new dict, and whoever reads one must copy it
before changing it. Kinds marked `persisted` are written to disk (one JSON file each,
atomically; fsynced for `durable` kinds) and loaded again by the next controller; the rest
(nodes, events) are made again by whoever made them.

A write is on disk before anyone sees it, as etcd commits before it answers: it is listed, given
to watches and informers only once its file is written. A write the disk refuses (ENOSPC or any
other error) changes nothing and is answered as kube-apiserver answers etcd's refusal, a 500
Status with the storage's message (`etcdserver: mvcc: database space exceeded`); the cluster says
once, in controller.log, that its disk is full, and once that it has room again. A name too long
for a file name (names go up to 253 characters) is stored under a shortened, hashed one.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import time
import uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from backend.local.registry.filenames import file_name
from backend.local.registry.kinds import Kind, Kinds
from backend.local.registry.revision import Revision
from backend.local.registry.status import ApiError, already_exists, conflict, gone, not_found
from backend.local.registry.values import copied
from training.atomic import write_atomic

log = logging.getLogger("kfcockpit.apiserver")

HISTORY = 20_000  # events kept for watches that resume
_QUEUE_LIMIT = 100_000  # a watcher this far behind is closed; it resumes or re-lists
REVISION_FILE = "revision"  # beside the stored objects' group directories
# What etcd answers when its quota is reached (mvcc.ErrNoSpace), as kube-apiserver relays it, and
# what that means here.
DISK_FULL = "etcdserver: mvcc: database space exceeded (the embedded cluster's state disk is full)"


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


Key = tuple[str, str, str]  # (kind.key, namespace or "", name)


@dataclass(frozen=True)
class Event:
    rv: int
    kind_key: str
    type: str  # ADDED, MODIFIED, DELETED
    object: dict[str, Any]


@dataclass(eq=False)
class Watch:
    kind: Kind
    namespace: str | None
    match: Callable[[dict[str, Any]], bool]
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    closed: bool = False

    def offer(self, event: Event) -> None:
        if self.closed or event.kind_key != self.kind.key:
            return
        meta = event.object.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return
        if not self.match(event.object):
            return
        if self.queue.qsize() >= _QUEUE_LIMIT:
            self.close()
            return
        self.queue.put_nowait(event)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class Store:
    def __init__(self, kinds: Kinds, directory: Path | None = None):
        self.kinds = kinds
        self.directory = directory
        self.objects: dict[Key, dict[str, Any]] = {}
        self.revision = Revision(directory / REVISION_FILE if directory is not None else None)
        self.history: deque[Event] = deque(maxlen=HISTORY)
        self.compacted = self.rv  # no event at or before this version is kept
        self.watches: set[Watch] = set()
        self.listeners: list[Callable[[Kind, Event], None]] = []  # the controllers' informers
        self.owned: dict[str, set[tuple[str, Key]]] = {}  # owner uid -> (kind key, key) of its dependents
        self.refusing = False  # the last write failed on disk (said once in the log)

    @property
    def rv(self) -> int:
        """The newest version handed out."""
        return self.revision.current

    # ------------------------------------------------------------------ reads

    @staticmethod
    def key(kind: Kind, namespace: str | None, name: str) -> Key:
        return (kind.key, namespace or "" if kind.namespaced else "", name)

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.objects.get(self.key(kind, namespace, name))
        if obj is None:
            raise not_found(kind.plural, name, kind.group)
        return obj

    def find(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get(self.key(kind, namespace, name))

    def list(self, kind: Kind, namespace: str | None = None,
             match: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
        found = [obj for (k, ns, _), obj in self.objects.items()
                 if k == kind.key and (namespace is None or ns == namespace) and (match is None or match(obj))]
        return sorted(found, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    # ------------------------------------------------------------------ writes

    def create(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copied(obj)  # the caller's dict (often a shallow copy of a stored one) stays theirs
        meta = obj.setdefault("metadata", {})
        key = self.key(kind, meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise already_exists(kind.plural, meta["name"], kind.group)
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_rfc3339())
        if "spec" in obj:
            meta["generation"] = 1
        return self._commit(kind, key, obj, "ADDED", durable=kind.durable)

    def update(self, kind: Kind, obj: dict[str, Any], expect_rv: str | None = None) -> dict[str, Any]:
        """Replace an object; `expect_rv`: the version the writer read (optimistic concurrency)."""
        obj = copied(obj)
        meta = obj["metadata"]
        key = self.key(kind, meta.get("namespace"), meta["name"])
        old = self.objects.get(key)
        if old is None:
            raise not_found(kind.plural, meta["name"], kind.group)
        if expect_rv and expect_rv != old["metadata"]["resourceVersion"]:
            raise conflict(kind.plural, meta["name"], "the object has been modified; please apply your "
                           "changes to the latest version and try again", kind.group)
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        for immutable in ("uid", "creationTimestamp"):  # deletion is the registry's (generic.py)
            if immutable in old["metadata"]:
                meta[immutable] = old["metadata"][immutable]
        if "spec" in obj:
            generation = old["metadata"].get("generation", 1)
            meta["generation"] = generation + 1 if obj.get("spec") != old.get("spec") else generation
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if obj == old:  # a write that changes nothing takes no version (as upstream)
            return old
        status_only = {k: v for k, v in obj.items() if k != "status"} == \
            {k: v for k, v in old.items() if k != "status"}
        return self._commit(kind, key, obj, "MODIFIED", durable=kind.durable and not status_only, old=old)

    def delete(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        key = self.key(kind, namespace, name)
        old = self.objects.get(key)
        if old is None:
            raise not_found(kind.plural, name, kind.group)
        with self._storing():
            version = self.revision.next()
            if kind.persisted and self.directory is not None:
                self._path(key).unlink(missing_ok=True)
        del self.objects[key]
        self._index_owners(key, old, add=False)
        last = copied(old)
        last["metadata"]["resourceVersion"] = str(version)
        self._publish(kind, Event(version, kind.key, "DELETED", last))
        return last

    def _commit(self, kind: Kind, key: Key, obj: dict[str, Any], event_type: str,
                durable: bool = True, old: dict[str, Any] | None = None) -> dict[str, Any]:
        """Persist, then store and publish: nothing is seen that is not on disk. A status-only
        change is written without fsync: observed state is re-derived by the controllers after
        a crash, and fsync would sit on the loop."""
        with self._storing():
            version = self.revision.next()
            obj["metadata"]["resourceVersion"] = str(version)
            if kind.persisted and self.directory is not None:
                # 0600: Secrets and tokens among them (an etcd data dir is its owner's alone)
                write_atomic(self._path(key), json.dumps(obj).encode(), durable=durable, mode=0o600)
        if old is not None:
            self._index_owners(key, old, add=False)
        self.objects[key] = obj
        self._index_owners(key, obj, add=True)
        self._publish(kind, Event(version, kind.key, event_type, obj))
        return obj

    @contextmanager
    def _storing(self) -> Iterator[None]:
        """A disk write: its failure becomes the Status upstream answers for a storage error (a
        500 with the storage's message, no path in it), said once in the log while it lasts."""
        try:
            yield
        except OSError as exc:
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            message = DISK_FULL if full else f"the embedded cluster could not store the object: {exc.strerror}"
            if not self.refusing:
                self.refusing = True
                if full:
                    log.error("the state disk is full: writes are refused until space is freed")
                else:
                    log.error("the state directory cannot be written (%s): writes are refused", exc.strerror)
            raise ApiError(500, "", message) from None
        if self.refusing:
            self.refusing = False
            log.warning("the state directory takes writes again")

    def _index_owners(self, key: Key, obj: dict[str, Any], add: bool) -> None:
        for ref in obj["metadata"].get("ownerReferences") or []:
            dependents = self.owned.setdefault(ref.get("uid", ""), set())
            if add:
                dependents.add(key)
            else:
                dependents.discard(key)

    def dependents(self, uid: str) -> list[tuple[str, dict[str, Any]]]:
        """(kind key, object) of everything whose ownerReferences name `uid` (the garbage
        collector's graph)."""
        return [(key[0], self.objects[key]) for key in list(self.owned.get(uid, ())) if key in self.objects]

    def _publish(self, kind: Kind, event: Event) -> None:
        if len(self.history) == self.history.maxlen:
            self.compacted = self.history[0].rv
        self.history.append(event)
        for watch in list(self.watches):
            watch.offer(event)
        for listener in self.listeners:
            listener(kind, event)

    # ------------------------------------------------------------------ watches

    def watch(self, kind: Kind, namespace: str | None, match: Callable[[dict[str, Any]], bool],
              since: str | None) -> tuple[Watch, list[Event]]:
        """A live watch and the events it must send first: the current objects as ADDED when
        `since` is empty or "0", else the kept history after `since` (410 Gone if too old)."""
        watch = Watch(kind, namespace, match)
        if not since or since == "0":
            backlog = [Event(self.rv, kind.key, "ADDED", obj) for obj in self.list(kind, namespace, match)]
        else:
            try:
                version = int(since)
            except ValueError:
                raise gone(f"too old resource version: {since}") from None
            if version < self.compacted:
                raise gone(f"too old resource version: {version} ({self.compacted})")
            backlog = [e for e in self.history if e.rv > version and e.kind_key == kind.key
                       and (namespace is None or e.object["metadata"].get("namespace") == namespace)
                       and match(e.object)]
        self.watches.add(watch)
        return watch, backlog

    def compact(self, before: int) -> None:
        """Forget the history older than version `before` (etcd's compaction): a watch from an
        older version is 410 Gone, and its client lists again."""
        self.compacted = max(self.compacted, min(before, self.rv))
        while self.history and self.history[0].rv <= self.compacted:
            self.history.popleft()

    def unwatch(self, watch: Watch) -> None:
        self.watches.discard(watch)

    def close_watches(self) -> None:
        for watch in list(self.watches):
            watch.close()

    # ------------------------------------------------------------------ persistence

    def _path(self, key: Key) -> Path:
        kind_key, namespace, name = key
        group, plural = kind_key.split("/")
        return self.directory / (group or "core") / plural / (namespace or "_cluster") / f"{file_name(name)}.json"

    def load(self) -> None:
        """Objects a previous controller stored; versions continue above theirs."""
        if self.directory is None or not self.directory.is_dir():
            return
        for kind in self.kinds.kinds:
            if not kind.persisted:
                continue
            base = self.directory / (kind.group or "core") / kind.plural
            for path in sorted(base.glob("*/*.json")):
                try:
                    obj = json.loads(path.read_text())
                    meta = obj["metadata"]
                    key = self.key(kind, meta.get("namespace"), meta["name"])
                    self.objects[key] = obj
                    self._index_owners(key, obj, add=True)
                    self.revision.advance_past(int(meta.get("resourceVersion", 0)))
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    log.error("skipping stored object %s: %s", path, exc)
        self.compacted = self.rv

    def all_of(self, kind: Kind) -> Iterator[dict[str, Any]]:
        return (obj for (k, _, _), obj in self.objects.items() if k == kind.key)
