"""What a write of one kind means: kube-apiserver's REST strategies, one object per kind.

The generic registry (generic.py) runs every create, update and delete the same way and asks the
kind's `Strategy` only what differs, as `registry/generic/registry/store.go` asks its
`CreateStrategy`, `UpdateStrategy` and `RESTGracefulDeleteStrategy`:

- `prepare_for_create` / `prepare_for_update`: defaults, and what a client may not set (a kind
  with a status subresource keeps its status out of the main resource: generic.py does that);
- `validate` / `validate_update`: refuse with an ApiError (422 Invalid, 403 Forbidden...) and
  return warnings; admission rules that read the cluster read it through `reader`, never through
  a controller;
- `webhooks`: the admission webhooks the kind's project registers upstream (a mutating and a
  validating one), run by the generic registry around the CRD schema's checks, in
  kube-apiserver's order (crds/__init__.py);
- `graceful_delete`: how many seconds a delete leaves the object to end (pods); `before_delete`:
  refuse a delete; `deleting`: what a delete marks besides deletionTimestamp (a Namespace turns
  Terminating) and `removable`: whether nothing but metadata.finalizers holds the object.

A strategy never starts anything: what a stored object sets off is a controller's, which learns
of it from a watch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from backend.local.registry.names import dns1123_subdomain
from backend.local.registry.status import ApiError

Obj = dict[str, Any]
# What a webhook reads from the cluster: (kind, namespace, name) -> the stored object, or None.
Lookup = Callable[[str, "str | None", str], "Obj | None"]


class Reader(Protocol):
    """What admission may read: the stored objects (never a controller's memory)."""

    def find(self, kind: str, namespace: str | None, name: str) -> Obj | None: ...

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]: ...


@dataclass(frozen=True)
class Webhooks:
    """A kind's admission webhooks, as its project registers them upstream: `mutate(obj, old, now,
    reader)` defaults `obj` in place, `validate(obj, old, reader)` refuses with an ApiError or
    returns warnings, each on the operations its `_on` names (a webhook configuration's rules).
    `old` is None on create; `now` is the request's time (RFC 3339)."""

    mutate: Callable[[Obj, "Obj | None", str, Reader], None] | None = None
    validate: Callable[[Obj, "Obj | None", Reader], list[str]] | None = None
    mutate_on: tuple[str, ...] = ("CREATE", "UPDATE")
    validate_on: tuple[str, ...] = ("CREATE", "UPDATE")


BACKGROUND, FOREGROUND, ORPHAN = "Background", "Foreground", "Orphan"
# The finalizers a delete with Orphan or Foreground propagation leaves for the garbage collector.
ORPHAN_FINALIZER, FOREGROUND_FINALIZER = "orphan", "foregroundDeletion"


class Strategy:
    """A plain object's rules (a ConfigMap's); each kind's strategy overrides what differs."""

    keep_status_on_create = False  # a kind whose creator also reports its status (a Node)
    # The problems with a name of this kind (upstream's ValidateNameFunc for it; most kinds'
    # names are RFC 1123 subdomains, as NameIsDNSSubdomain says).
    name_problems = staticmethod(dns1123_subdomain)
    default_propagation = BACKGROUND  # the dependents' fate when a delete does not say
    webhooks = Webhooks()  # none: most kinds have no admission webhook

    def prepare_for_create(self, obj: Obj, reader: Reader) -> None:
        """Defaults and system fields of a new object (mutates `obj`)."""

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        """Raise ApiError for an object that may not be created; return warnings."""
        return []

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        """What a client may not change on update (mutates `obj`)."""

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        return []

    def validate_status_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        return []

    def update_subresource(self, subresource: str, body: Obj, old: Obj) -> Obj:
        """The object after a write to a subresource of the kind's own (a pod's binding)."""
        raise ApiError(404, "NotFound", f"the server could not find the requested resource ({subresource})")

    def before_delete(self, obj: Obj, reader: Reader) -> None:
        """Raise ApiError to refuse deleting `obj`."""

    def graceful_delete(self, obj: Obj, grace: int | None) -> int:
        """Seconds the object is left to end before it goes (0: at once); `grace` is the
        request's gracePeriodSeconds, None when it gave none."""
        return 0

    def deleting(self, obj: Obj) -> None:
        """What a delete marks on an object it keeps, besides deletionTimestamp (mutates `obj`)."""

    def removable(self, obj: Obj) -> bool:
        """Whether an object being deleted may go now, finalizers and grace aside."""
        return True
