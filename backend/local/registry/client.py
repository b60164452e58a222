"""The in-process client: what controllers and kubelets use instead of HTTP, as client-go is
theirs upstream. The generic registry by kind name, so every write goes through the same
strategies (defaults, validation, deletion) as a request to the API server does.

Reads return copies (the store's objects are shared and never change in place); writes take the
object to store, and their managedFields name the client's `manager` (what client-go's user
agent or a field manager names upstream: kube-controller-manager, kubelet...). `mutate` is a
read-modify-write: the process is single-threaded, so a change
made without awaiting between the read and the write never conflicts.
"""

from __future__ import annotations

from typing import Callable

from backend.local.registry.generic import Registry, rfc3339
from backend.local.registry.status import ApiError
from backend.local.registry.store import Event, Watch
from backend.local.registry.strategy import Obj
from backend.local.registry.tokens import TokenIssuer
from backend.local.registry.values import copied


def is_not_found(exc: ApiError) -> bool:
    return exc.code == 404


MANAGER = "kfcockpit-controller"


class Client:
    def __init__(self, registry: Registry, manager: str = MANAGER, tokens: TokenIssuer | None = None):
        self.registry, self.manager = registry, manager
        self.tokens = tokens  # TokenRequest: bound service-account tokens (a kubelet's projected volumes)

    @property
    def kinds(self):
        return self.registry.kinds

    def now(self) -> str:
        """The registry's clock now, as a metav1.Time (RFC 3339, seconds)."""
        return rfc3339(self.registry.clock())

    def _kind(self, kind: str):
        return self.registry.kinds.named(kind)

    # ------------------------------------------------------------------ reads

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        found = self.registry.find(kind, namespace, name)
        return copied(found) if found is not None else None

    def list(self, kind: str, namespace: str | None = None, labels: dict[str, str] | None = None,
             match: Callable[[Obj], bool] | None = None) -> list[Obj]:
        def wanted(obj: Obj) -> bool:
            have = obj["metadata"].get("labels") or {}
            return all(have.get(k) == v for k, v in (labels or {}).items()) and (match is None or match(obj))

        return [copied(o) for o in self.registry.store.list(self._kind(kind), namespace, wanted)]

    def peek(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The stored object itself, to read and never change (no copy: cheap for checks)."""
        return self.registry.find(kind, namespace, name)

    def dependents(self, uid: str) -> list[tuple[str, Obj]]:
        """(kind, object) of everything whose ownerReferences name `uid`."""
        return [(self.kinds.by_key(k).kind, copied(o)) for k, o in self.registry.store.dependents(uid)]

    def watch(self, kind: str, namespace: str | None = None, match: Callable[[Obj], bool] | None = None,
              since: str | None = None) -> tuple[Watch, list[Event]]:
        """A watch of the store (an asyncio queue) and what it must deliver first: the current
        objects as ADDED without `since`, else what happened after it (410 Gone when too old)."""
        return self.registry.store.watch(self._kind(kind), namespace, match or (lambda _o: True), since)

    def unwatch(self, watch: Watch) -> None:
        self.registry.store.unwatch(watch)

    # ------------------------------------------------------------------ writes

    def create(self, kind: str, obj: Obj) -> Obj:
        return copied(self.registry.create(self._kind(kind), obj, manager=self.manager)[0])

    def update(self, kind: str, obj: Obj) -> Obj:
        """Replace the object; its metadata.resourceVersion, when given, must still be current."""
        return copied(self.registry.update(self._kind(kind), obj, obj["metadata"].get("resourceVersion"),
                                                  manager=self.manager)[0])

    def update_status(self, kind: str, obj: Obj) -> Obj:
        return copied(self.registry.update(self._kind(kind), obj, obj["metadata"].get("resourceVersion"),
                                                  subresource="status", manager=self.manager)[0])

    def finalize(self, kind: str, obj: Obj) -> Obj:
        """A Namespace's /finalize: its spec.finalizers as `obj` has them."""
        return copied(self.registry.update(self._kind(kind), obj, subresource="finalize",
                                                  manager=self.manager)[0])

    def bind(self, namespace: str, name: str, node: str) -> Obj:
        """pods/binding: the pod assigned to `node` (the scheduler's write)."""
        body = {"metadata": {"name": name, "namespace": namespace}, "target": {"kind": "Node", "name": node}}
        return copied(self.registry.update(self._kind("Pod"), body, subresource="binding")[0])

    def mutate(self, kind: str, namespace: str | None, name: str, change: Callable[[Obj], object],
               status: bool = False) -> Obj | None:
        """Apply `change` to the live object and store it (its status only, with `status`);
        None when there is no such object. `change` returning False means: nothing to write."""
        obj = self.get(kind, namespace, name)
        if obj is None:
            return None
        if change(obj) is False:
            return obj
        return self.update_status(kind, obj) if status else self.update(kind, obj)

    def delete(self, kind: str, namespace: str | None, name: str, grace: int | None = None,
               propagation: str | None = None, uid: str | None = None) -> Obj | None:
        """Delete it; the object when it is kept (finalizers, grace), None once it is gone (or
        was not there)."""
        try:
            obj, gone = self.registry.delete(self._kind(kind), namespace, name, grace, propagation, uid)
        except ApiError as exc:
            if is_not_found(exc):
                return None
            raise
        return None if gone else copied(obj)
