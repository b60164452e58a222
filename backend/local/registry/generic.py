"""The generic registry: every create, update and delete of every kind, one way, as kube-apiserver's
`registry/generic/registry/store.go` runs them, with what differs per kind asked of its Strategy.

- create: the namespace must exist and not be terminating (the NamespaceLifecycle admission
  plugin), generateName is filled, system fields are the server's, a kind with a status
  subresource starts without one; a custom resource passes its upstream admission (crds/: its
  CRD's schema and defaults, CEL rules, the Trainer's, JobSet's webhooks); then the strategy's
  defaults and validation, then the store.
- update: the main resource never changes status, /status changes only status, /finalize only a
  Namespace's spec.finalizers; an object being deleted may lose finalizers but gain none. An
  object being deleted that has nothing left holding it (finalizers, grace, its strategy's own
  reason) goes when the update that freed it is stored. A custom resource's update names the
  resourceVersion it read (CRDs' AllowUnconditionalUpdate is false); an update naming another uid
  fails its precondition (409), a patch that changes it is invalid (objectmeta.py).
- every create and update: metadata as objectmeta.py checks it, and managedFields recorded for
  the writer (managed_fields.py); `apply` is server-side apply, its merge and conflicts.
- delete: the strategy may refuse it or give it a grace period (pods); the propagation policy
  becomes the garbage collector's finalizer (orphan, foregroundDeletion), as
  `deletionFinalizersForGarbageCollection` does; an object held by finalizers or grace is only
  marked (deletionTimestamp, deletionGracePeriodSeconds) and stays until they are gone.

A write returns once stored: nothing here waits for, or runs, a controller.
"""

from __future__ import annotations

import secrets
import time
import uuid
from typing import Callable

from backend.local.registry import crds, managed_fields, objectmeta
from backend.local.registry import fielderrors as fe
from backend.local.registry.fieldshapes import root_shape
from backend.local.registry.kinds import Kind, Kinds
from backend.local.registry.managed_fields import Writer
from backend.local.registry.status import ApiError, bad_request, conflict, forbidden, invalid, not_found
from backend.local.registry.store import Store
from backend.local.registry.strategy import (
    BACKGROUND,
    FOREGROUND,
    FOREGROUND_FINALIZER,
    ORPHAN,
    ORPHAN_FINALIZER,
    Obj,
    Strategy,
)
from backend.local.registry.values import copied

_SYSTEM_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "generation")
# What upstream's names.SimpleNameGenerator appends to a generateName: 5 of these.
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def generated_name(base: str) -> str:
    return base + "".join(secrets.choice(_NAME_CHARS) for _ in range(5))


class Registry:
    def __init__(self, kinds: Kinds, store: Store, strategies: dict[str, Strategy],
                 clock: Callable[[], float] = time.time):
        self.kinds, self.store, self.clock = kinds, store, clock
        self._strategies = strategies
        self._plain = Strategy()

    def strategy(self, kind: Kind) -> Strategy:
        return self._strategies.get(kind.kind, self._plain)

    # ------------------------------------------------------------------ reads (the strategies' Reader)

    def find(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The stored object, or None (a kind this cluster does not serve included: a webhook
        reads what a request names)."""
        try:
            found = self.kinds.named(kind)
        except KeyError:
            return None
        return self.store.find(found, namespace if found.namespaced else None, name)

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        return self.store.list(self.kinds.named(kind), namespace)

    # ------------------------------------------------------------------ create

    def _writer(self, kind: Kind, manager: str, subresource: str | None = None) -> Writer:
        return Writer(manager, kind.api_version, subresource or "", "status" in kind.subresources)

    def create(self, kind: Kind, obj: Obj, dry_run: bool = False, manager: str = "") -> tuple[Obj, list[str]]:
        """Store a new object; `manager` is the writer its managedFields name."""
        return self._create(kind, obj, dry_run, self._writer(kind, manager))

    def _create(self, kind: Kind, obj: Obj, dry_run: bool, writer: Writer | None) -> tuple[Obj, list[str]]:
        """writer None: obj's managedFields are already what they must be (an apply)."""
        obj = copied(obj)
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generated_name(meta["generateName"])
        if not meta.get("name"):
            raise invalid(kind.kind, "", [("metadata.name", "Required value: name or generateName is required")],
                          kind.group)
        if kind.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
            if kind.kind != "Event":
                self._namespace_open(meta["namespace"])
        else:
            meta.pop("namespace", None)
        for system in _SYSTEM_FIELDS:
            meta.pop(system, None)
        meta["uid"] = str(uuid.uuid4())  # before the strategy: some derive fields from it (a Job's selector)
        strategy = self.strategy(kind)
        if "status" in kind.subresources and not strategy.keep_status_on_create:
            obj.pop("status", None)
        warnings = crds.admit(kind.kind, "CREATE", obj, None, strategy.webhooks, self, rfc3339(self.clock()))
        strategy.prepare_for_create(obj, self)
        objectmeta.check_create(kind, obj, strategy.name_problems)
        warnings += strategy.validate(obj, self)
        if writer is not None:
            shell = managed_fields.empty_live(obj, typed=crds.schema(kind.kind) is None)
            managed_fields.record_update(root_shape(kind.kind), None, obj, writer, rfc3339(self.clock()), shell)
        if dry_run:
            return obj, warnings
        return self.store.create(kind, obj), warnings

    def _namespace_open(self, namespace: str) -> None:
        """The NamespaceLifecycle admission plugin: no new object in a namespace that is missing
        or being deleted."""
        found = self.find("Namespace", None, namespace)
        if found is None:
            raise not_found("namespaces", namespace)
        if found["metadata"].get("deletionTimestamp"):
            raise forbidden(f"unable to create new content in namespace {namespace} because it is being terminated")

    # ------------------------------------------------------------------ update

    def update(self, kind: Kind, obj: Obj, expect_rv: str | None = None, subresource: str | None = None,
               dry_run: bool = False, manager: str = "", uid_precondition: bool = True) -> tuple[Obj, list[str]]:
        """Replace an object (or its subresource); `expect_rv`: the version the writer read. An
        update's uid is a precondition (a PUT's, as upstream's UpdatedObjectInfo makes it); a
        patch's is a field that may not change (`uid_precondition=False`)."""
        meta = obj.get("metadata") or {}
        old = self.store.get(kind, meta.get("namespace") if kind.namespaced else None, meta.get("name", ""))
        if uid_precondition and meta.get("uid") and meta["uid"] != old["metadata"].get("uid"):
            raise conflict(kind.plural, old["metadata"]["name"], f"Precondition failed: UID in precondition: "
                           f"{meta['uid']}, UID in object meta: {old['metadata'].get('uid')}", kind.group)
        if not expect_rv and subresource in (None, "status") and crds.schema(kind.kind) is not None:
            raise fe.invalid(f"{kind.plural}.{kind.group}", old["metadata"]["name"], [
                fe.invalid_value("metadata.resourceVersion", fe.GoJSON("0x0"), "must be specified for an update")])
        return self._update(kind, obj, old, expect_rv, subresource, dry_run, self._writer(kind, manager, subresource))

    def _update(self, kind: Kind, obj: Obj, old: Obj, expect_rv: str | None, subresource: str | None,
                dry_run: bool, writer: Writer | None) -> tuple[Obj, list[str]]:
        strategy = self.strategy(kind)
        if subresource == "status":
            new = {**copied(old), "status": copied(obj.get("status"))}
            warnings = crds.admit_status(kind.kind, new, old) + strategy.validate_status_update(new, old, self)
        elif subresource == "finalize":
            new = copied(old)
            new.setdefault("spec", {})["finalizers"] = list((obj.get("spec") or {}).get("finalizers") or [])
            warnings = []
        elif subresource is not None:
            new, warnings, writer = strategy.update_subresource(subresource, obj, copied(old)), [], None
        else:
            new = copied(obj)
            new["apiVersion"], new["kind"] = kind.api_version, kind.kind
            new_meta = new.setdefault("metadata", {})
            new_meta["uid"] = new_meta.get("uid") or old["metadata"].get("uid")
            if "status" in kind.subresources:
                new.pop("status", None)
                if "status" in old:
                    new["status"] = copied(old["status"])
            for system in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                new_meta.pop(system, None)
                if system in old["metadata"]:
                    new_meta[system] = old["metadata"][system]
            self._check_finalizers(kind, new, old)
            warnings = crds.admit(kind.kind, "UPDATE", new, old, strategy.webhooks, self, rfc3339(self.clock()))
            strategy.prepare_for_update(new, old)
            objectmeta.check_update(kind, new, old, strategy.name_problems)
            warnings += strategy.validate_update(new, old, self)
        if writer is not None:
            managed_fields.record_update(root_shape(kind.kind), old, new, writer, rfc3339(self.clock()))
        elif "managedFields" in (obj.get("metadata") or {}):  # an apply's, already computed
            new["metadata"]["managedFields"] = copied(obj["metadata"]["managedFields"])
        if dry_run:
            return new, warnings
        stored = self.store.update(kind, new, expect_rv)
        if stored["metadata"].get("deletionTimestamp") and self._removable(kind, stored):
            return self.store.delete(kind, stored["metadata"].get("namespace"), stored["metadata"]["name"]), warnings
        return stored, warnings

    # ------------------------------------------------------------------ server-side apply

    def apply(self, kind: Kind, namespace: str | None, name: str, config: Obj, manager: str, force: bool = False,
              subresource: str | None = None, dry_run: bool = False) -> tuple[Obj, list[str], bool]:
        """Server-side apply of `config` by `manager` (created when missing): (the object,
        warnings, whether it was created). 409 Conflict for fields other managers own, unless
        `force`."""
        if (config.get("apiVersion"), config.get("kind")) != (kind.api_version, kind.kind):
            group, _, version = str(config.get("apiVersion") or "").rpartition("/")
            raise bad_request(f"invalid object type: {group}/{version}, Kind={config.get('kind') or ''}")
        live = self.store.find(kind, namespace if kind.namespaced else None, name)
        if live is None and subresource is not None:
            raise not_found(kind.plural, name, kind.group)
        writer = self._writer(kind, manager, subresource)
        shell = managed_fields.empty_live(config, typed=crds.schema(kind.kind) is None)
        merged = managed_fields.apply(root_shape(kind.kind), live, config, writer, force, rfc3339(self.clock()), shell)
        merged_name = (merged.get("metadata") or {}).get("name")
        if merged_name != name:
            raise bad_request(f"the name of the object ({merged_name or ''}) does not match the name on the URL "
                              f"({name})")
        if live is None:
            merged["metadata"]["namespace"] = namespace
            return (*self._create(kind, merged, dry_run, None), True)
        return (*self._update(kind, merged, live, live["metadata"]["resourceVersion"], subresource, dry_run, None),
                False)

    @staticmethod
    def _check_finalizers(kind: Kind, new: Obj, old: Obj) -> None:
        if not old["metadata"].get("deletionTimestamp"):
            return
        added = set(new["metadata"].get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
        if added:
            raise invalid(kind.kind, old["metadata"]["name"],
                          [("metadata.finalizers", "Forbidden: no new finalizers can be added if the object is "
                                                   "being deleted, found new finalizers "
                                                   f"{sorted(added)}")], kind.group)

    def _removable(self, kind: Kind, obj: Obj) -> bool:
        meta = obj["metadata"]
        return (not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds")
                and self.strategy(kind).removable(obj))

    # ------------------------------------------------------------------ delete

    def delete(self, kind: Kind, namespace: str | None, name: str, grace: int | None = None,
               propagation: str | None = None, uid: str | None = None,
               dry_run: bool = False) -> tuple[Obj, bool]:
        """(the object, whether it is gone now); a kept one is marked being deleted."""
        obj = self.store.get(kind, namespace if kind.namespaced else None, name)
        meta = obj["metadata"]
        if uid and uid != meta.get("uid"):
            raise conflict(kind.plural, name, f"Precondition failed: UID in precondition: {uid}, UID in object "
                                              f"meta: {meta.get('uid')}", kind.group)
        strategy = self.strategy(kind)
        strategy.before_delete(obj, self)
        if propagation not in (None, BACKGROUND, FOREGROUND, ORPHAN):
            raise ApiError(422, "Invalid", f"DeleteOptions.propagationPolicy: Unsupported value: \"{propagation}\": "
                                           'supported values: "Orphan", "Background", "Foreground"')
        if dry_run:
            return obj, False
        new = copied(obj)
        new_meta = new["metadata"]
        finalizers = _gc_finalizers(new_meta.get("finalizers") or [], propagation, strategy.default_propagation)
        seconds = max(0, strategy.graceful_delete(obj, grace))
        now = self.clock()
        if not meta.get("deletionTimestamp"):
            new_meta["deletionTimestamp"] = rfc3339(now + seconds)
            new_meta["deletionGracePeriodSeconds"] = seconds
            strategy.deleting(new)
        elif seconds < int(meta.get("deletionGracePeriodSeconds") or 0):  # a shorter grace wins
            new_meta["deletionTimestamp"] = rfc3339(now + seconds)
            new_meta["deletionGracePeriodSeconds"] = seconds
        if finalizers:
            new_meta["finalizers"] = finalizers
        else:
            new_meta.pop("finalizers", None)
        if self._removable(kind, new):
            return self.store.delete(kind, meta.get("namespace"), name), True
        return self.store.update(kind, new), False


def _gc_finalizers(finalizers: list[str], asked: str | None, default: str) -> list[str]:
    """The object's finalizers with the garbage collector's for the policy: the one asked for,
    else the one a finalizer already names (a second delete keeps a foreground deletion
    foreground), else the kind's default. Orphan and foregroundDeletion exclude each other;
    background removes both."""
    policy = asked or (ORPHAN if ORPHAN_FINALIZER in finalizers else FOREGROUND if FOREGROUND_FINALIZER in finalizers
                       else default)
    kept = [f for f in finalizers if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
    if policy == ORPHAN:
        kept.append(ORPHAN_FINALIZER)
    elif policy == FOREGROUND:
        kept.append(FOREGROUND_FINALIZER)
    return kept
