"""The garbage collector: what a deleted owner's dependents become, by their ownerReferences, as
kubernetes' pkg/controller/garbagecollector decides it.

- An object all of whose owners are gone (none of that uid exists) is deleted (background); the
  references to owners that are gone are removed from one that still has another owner.
- An owner deleted with propagationPolicy Orphan carries the `orphan` finalizer: its
  dependents lose their reference to it, then the finalizer goes (and with it the owner).
- An owner deleted with Foreground carries `foregroundDeletion`: its dependents are deleted
  (foreground too, so a chain is gone bottom-up), and the finalizer goes once no dependent that
  blocks its owner's deletion (blockOwnerDeletion) is left. Until then it shows, being deleted.

The dependency graph is the store's index of ownerReferences by owner uid. At start every object
with owners, and every one waiting on the collector, is looked at once (a controller that
stopped may have left either).
"""

from __future__ import annotations

from typing import Hashable

from backend.local.controllers.base import Controller
from backend.local.registry.client import Client
from backend.local.registry.strategy import FOREGROUND_FINALIZER, ORPHAN_FINALIZER
from backend.local.registry.informer import DELETED
from backend.local.registry.strategy import BACKGROUND, FOREGROUND, Obj

# Kinds nobody owns here, or that own nothing: not worth a watch.
_SKIPPED = ("Event", "Namespace", "Node", "StorageClass", "VolumeSnapshotClass")


class GarbageCollector(Controller):
    name = "garbage-collector"

    def __init__(self, client: Client):
        super().__init__(client)
        for kind in client.kinds.stored():
            if kind.kind not in _SKIPPED:
                self.inform(kind.kind, self._changed_handler(kind.kind))

    def _changed_handler(self, kind: str):
        def changed(event_type: str, obj: Obj, old: Obj | None) -> None:
            meta = obj["metadata"]
            key = (kind, meta.get("namespace") or "", meta["name"])
            if event_type == DELETED:
                for dep_kind, dependent in self.client.dependents(meta.get("uid", "")):
                    dep = dependent["metadata"]
                    self.queue.add((dep_kind, dep.get("namespace") or "", dep["name"]))
                for owner in _owners_of(obj, self.client):
                    self.queue.add(owner)  # a foreground owner may be waiting for this one
                return
            finalizers = meta.get("finalizers") or []
            if meta.get("deletionTimestamp") and (ORPHAN_FINALIZER in finalizers or FOREGROUND_FINALIZER in finalizers):
                self.queue.add(key)
            if meta.get("ownerReferences") and (old is None or _refs(old) != _refs(obj)
                                                or meta.get("deletionTimestamp")):
                self.queue.add(key)
                if meta.get("deletionTimestamp"):
                    for owner in _owners_of(obj, self.client):
                        self.queue.add(owner)
        return changed

    def started(self) -> None:
        for informer in self.informers:
            for obj in informer.items():
                meta = obj["metadata"]
                if meta.get("ownerReferences") or meta.get("deletionTimestamp"):
                    self.queue.add((informer.kind, meta.get("namespace") or "", meta["name"]))

    async def reconcile(self, key: Hashable) -> float | None:
        kind, namespace, name = key
        obj = self.client.get(kind, namespace or None, name)
        if obj is None:
            return None
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        if meta.get("deletionTimestamp") and ORPHAN_FINALIZER in finalizers:
            self._orphan_dependents(obj)
            self._drop_finalizer(kind, obj, ORPHAN_FINALIZER)
            return None
        if meta.get("deletionTimestamp") and FOREGROUND_FINALIZER in finalizers:
            if not self._delete_dependents(obj):
                self._drop_finalizer(kind, obj, FOREGROUND_FINALIZER)
            return None
        self._collect(kind, obj)
        return None

    # ------------------------------------------------------------------ owners

    def _owner(self, obj: Obj, ref: dict) -> Obj | None:
        """The live owner a reference names (same uid), or None."""
        kind = self.client.kinds.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if kind is None:
            return None
        found = self.client.peek(kind.kind, obj["metadata"].get("namespace") if kind.namespaced else None,
                                          ref.get("name", ""))
        return found if found is not None and found["metadata"].get("uid") == ref.get("uid") else None

    def _collect(self, kind: str, obj: Obj) -> None:
        """Delete a dependent whose owners are all gone; drop references to the ones gone; delete
        one in the foreground when an owner waits for it."""
        refs = obj["metadata"].get("ownerReferences") or []
        if not refs:
            return
        live = [(ref, self._owner(obj, ref)) for ref in refs]
        present = [(ref, owner) for ref, owner in live if owner is not None]
        meta = obj["metadata"]
        if not present:
            if not meta.get("deletionTimestamp"):
                self.client.delete(kind, meta.get("namespace"), meta["name"], propagation=BACKGROUND,
                                   uid=meta.get("uid"))
            return
        if len(present) < len(refs):
            kept = [ref for ref, _ in present]
            self.client.mutate(kind, meta.get("namespace"), meta["name"],
                               lambda o: o["metadata"].__setitem__("ownerReferences", kept))
        waiting = any(ref.get("blockOwnerDeletion") and owner["metadata"].get("deletionTimestamp")
                      and FOREGROUND_FINALIZER in (owner["metadata"].get("finalizers") or [])
                      for ref, owner in present)
        if waiting and not meta.get("deletionTimestamp"):
            self.client.delete(kind, meta.get("namespace"), meta["name"], propagation=FOREGROUND, uid=meta.get("uid"))

    # ------------------------------------------------------------------ an owner being deleted

    def _dependents(self, owner: Obj) -> list[tuple[str, Obj]]:
        return self.client.dependents(owner["metadata"].get("uid", ""))

    def _orphan_dependents(self, owner: Obj) -> None:
        uid = owner["metadata"].get("uid")
        for kind, dependent in self._dependents(owner):
            meta = dependent["metadata"]

            def orphan(o: Obj) -> None:
                refs = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
                if refs:
                    o["metadata"]["ownerReferences"] = refs
                else:
                    o["metadata"].pop("ownerReferences", None)
            self.client.mutate(kind, meta.get("namespace"), meta["name"], orphan)

    def _delete_dependents(self, owner: Obj) -> bool:
        """Delete the owner's dependents (foreground); True while one that blocks it is left."""
        uid = owner["metadata"].get("uid")
        blocking = False
        for kind, dependent in self._dependents(owner):
            meta = dependent["metadata"]
            if not meta.get("deletionTimestamp"):
                self.client.delete(kind, meta.get("namespace"), meta["name"], propagation=FOREGROUND,
                                   uid=meta.get("uid"))
            if self.client.peek(kind, meta.get("namespace"), meta["name"]) is not None:
                blocking = blocking or any(r.get("uid") == uid and r.get("blockOwnerDeletion")
                                           for r in meta.get("ownerReferences") or [])
        return blocking

    def _drop_finalizer(self, kind: str, obj: Obj, finalizer: str) -> None:
        meta = obj["metadata"]

        def drop(o: Obj) -> None:
            left = [f for f in o["metadata"].get("finalizers") or [] if f != finalizer]
            if left:
                o["metadata"]["finalizers"] = left
            else:
                o["metadata"].pop("finalizers", None)
        self.client.mutate(kind, meta.get("namespace"), meta["name"], drop)


def _refs(obj: Obj) -> list:
    return obj["metadata"].get("ownerReferences") or []


def _owners_of(obj: Obj, client: Client) -> list[tuple[str, str, str]]:
    """Queue keys of the owners `obj` names (their kind by apiVersion and kind)."""
    keys = []
    for ref in _refs(obj):
        kind = client.kinds.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if kind is not None:
            keys.append((kind.kind, obj["metadata"].get("namespace") or "" if kind.namespaced else "",
                         ref.get("name", "")))
    return keys
