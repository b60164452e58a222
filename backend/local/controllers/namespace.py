"""The namespace controller: a deleted namespace empties, then goes, as kubernetes'
pkg/controller/namespace/deletion does it.

A delete leaves a namespace Terminating (its `kubernetes` finalizer holds it; generic.py). This
controller deletes every object in it, each on its own, as its kind deletes (a pod gracefully, a
claim once no pod uses it, a job's pods with the job); what is left is told in the namespace's
conditions (NamespaceContentRemaining, NamespaceFinalizersRemaining, in upstream's words) and
looked at again as it goes. Once nothing is left, the `kubernetes` finalizer is removed
(/finalize) and the namespace deleted. Nothing outside the namespace is touched, and nothing
fails halfway: an object that cannot go yet only waits.
"""

from __future__ import annotations

from collections import Counter
from typing import Hashable

from backend.local.controllers.base import Controller
from backend.local.registry.client import Client
from backend.local.registry.informer import DELETED
from backend.local.registry.strategy import BACKGROUND, Obj

FINALIZER = "kubernetes"
_CONDITIONS = ("NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
               "NamespaceDeletionContentFailure", "NamespaceContentRemaining", "NamespaceFinalizersRemaining")


class NamespaceController(Controller):
    name = "namespace-controller"

    def __init__(self, client: Client):
        super().__init__(client)
        self.inform("Namespace", self._namespace_changed)
        self._namespaced = [k for k in client.kinds.stored() if k.namespaced]
        for kind in self._namespaced:
            self.inform(kind.kind, self._content_changed)

    def _namespace_changed(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        if event_type != DELETED and obj["metadata"].get("deletionTimestamp"):
            self.queue.add(obj["metadata"]["name"])

    def _content_changed(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        namespace = obj["metadata"].get("namespace")
        if event_type == DELETED and namespace:
            live = self.client.peek("Namespace", None, namespace)
            if live is not None and live["metadata"].get("deletionTimestamp"):
                self.queue.add(namespace)

    async def reconcile(self, key: Hashable) -> float | None:
        namespace = self.client.get("Namespace", None, str(key))
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return None
        remaining: Counter[str] = Counter()
        finalizers: Counter[str] = Counter()
        for kind in self._namespaced:
            for obj in self.client.list(kind.kind, str(key)):
                meta = obj["metadata"]
                if not meta.get("deletionTimestamp"):
                    obj = self.client.delete(kind.kind, str(key), meta["name"], propagation=BACKGROUND,
                                             uid=meta.get("uid"))
                if obj is not None:
                    remaining[kind.plural + ("." + kind.group if kind.group else "")] += 1
                    for finalizer in obj["metadata"].get("finalizers") or []:
                        finalizers[finalizer] += 1
        if remaining:
            self._report(str(key), remaining, finalizers)
            return None  # the content's deletions queue it again
        if FINALIZER in ((namespace.get("spec") or {}).get("finalizers") or []):
            namespace["spec"]["finalizers"] = [f for f in namespace["spec"]["finalizers"] if f != FINALIZER]
            self.client.finalize("Namespace", namespace)
        self.client.delete("Namespace", None, str(key))
        return None

    def _report(self, namespace: str, remaining: Counter, finalizers: Counter) -> None:
        now = self.client.now()
        content = ", ".join(f"{resource} has {n} resource instances" for resource, n in sorted(remaining.items()))
        held = ", ".join(f"{f} in {n} resource instances" for f, n in sorted(finalizers.items()))
        wanted = {
            "NamespaceContentRemaining": ("True", "SomeResourcesRemain", f"Some resources are remaining: {content}"),
            "NamespaceFinalizersRemaining": (("True", "SomeFinalizersRemain",
                                              f"Some content in the namespace has finalizers remaining: {held}")
                                             if finalizers else ("False", "ContentHasNoFinalizers",
                                                                 "All content-preserving finalizers finished")),
        }

        def conditions(ns: Obj) -> object:
            status = ns.setdefault("status", {})
            before = {c["type"]: c for c in status.get("conditions") or []}
            after = []
            for kind in _CONDITIONS:
                state, reason, message = wanted.get(kind, ("False", _CLEAN_REASONS.get(kind, ""), _CLEAN.get(kind, "")))
                was = before.get(kind) or {}
                changed = (was.get("status"), was.get("reason"), was.get("message")) != (state, reason, message)
                after.append({"type": kind, "status": state, "reason": reason, "message": message,
                              "lastTransitionTime": now if changed else was.get("lastTransitionTime", now)})
            if after == status.get("conditions"):
                return False
            status["conditions"] = after
            return True
        self.client.mutate("Namespace", None, namespace, conditions, status=True)


# The condition types upstream sets False when all is well, with their reasons and messages.
_CLEAN_REASONS = {"NamespaceDeletionDiscoveryFailure": "ResourcesDiscovered",
                  "NamespaceDeletionGroupVersionParsingFailure": "ParsedGroupVersions",
                  "NamespaceDeletionContentFailure": "ContentDeleted"}
_CLEAN = {"NamespaceDeletionDiscoveryFailure": "All resources successfully discovered",
          "NamespaceDeletionGroupVersionParsingFailure": "All legacy kube types successfully parsed",
          "NamespaceDeletionContentFailure": "All content successfully deleted, may be waiting on finalization"}
