"""What server-side apply needs to know of a kind's schema: at each place of an object, whether it
is a struct (named fields), a map (any keys), a list and how its items are told apart (atomic,
a set of scalars, or a map keyed by some of its items' fields), or a leaf. This is what
structured-merge-diff's `schema` package (sigs.k8s.io/structured-merge-diff/v6/schema) reads
from a type's OpenAPI: `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
`x-kubernetes-map-type`.

A custom resource's shape is its CRD's openAPIV3Schema (crds/); a subtree with
`x-kubernetes-preserve-unknown-fields` and no properties is "deduced" as SMD deduces untyped
values (maps granular, every key a member; lists atomic). The core kinds' shapes come from the
core/v1 Go tags the embedded cluster knows (merge.MERGE_KEYS: a list with a patchMergeKey is
a map list on that key, as kube-openapi's schema conversion makes it; `finalizers` a set; any
other list atomic; a few known string maps; any other object a struct whose every field is
declared). Every kind's root `metadata` is ObjectMeta.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.local.registry import crds
from backend.local.registry.merge import MERGE_KEYS

ATOMIC, SET, MAP = "atomic", "set", "map"

# core/v1 and meta/v1 fields that are maps (map[string]string or map of quantities)
_CORE_MAPS = frozenset({"labels", "annotations", "data", "binaryData", "stringData", "nodeSelector", "limits",
                        "requests", "capacity", "allocatable", "matchLabels", "parameters"})
_CORE_SETS = frozenset({"finalizers"})


class Shape:
    """The schema at one place of an object (an abstract base: `deduced()` is what nothing
    describes)."""

    def is_struct(self) -> bool:
        """An object whose declared fields are named fields (not members of a map)."""
        return False

    def declares(self, key: str) -> bool:
        """Whether `key` is a named field of this struct (SMD's Map.FindField)."""
        return False

    def atomic_map(self) -> bool:
        return False

    def field(self, key: str) -> Shape:
        return DEDUCED

    def list_type(self) -> tuple[str, tuple[str, ...]]:
        """(atomic|set|map, the map list's keys)."""
        return ATOMIC, ()

    def item(self) -> Shape:
        return DEDUCED


DEDUCED = Shape()


@dataclass(frozen=True)
class OpenApiShape(Shape):
    """A node of a CRD's structural schema."""

    node: dict[str, Any]

    def _properties(self) -> dict[str, Any] | None:
        properties = self.node.get("properties")
        return properties if isinstance(properties, dict) else None

    def is_struct(self) -> bool:
        return self._properties() is not None

    def declares(self, key: str) -> bool:
        return key in (self._properties() or {})

    def atomic_map(self) -> bool:
        return self.node.get("x-kubernetes-map-type") == "atomic"

    def field(self, key: str) -> Shape:
        properties = self._properties() or {}
        if key in properties:
            return shape_of(properties[key])
        extra = self.node.get("additionalProperties")
        return shape_of(extra) if isinstance(extra, dict) else DEDUCED

    def list_type(self) -> tuple[str, tuple[str, ...]]:
        kind = self.node.get("x-kubernetes-list-type") or ATOMIC
        return kind, tuple(self.node.get("x-kubernetes-list-map-keys") or ()) if kind == MAP else ()

    def item(self) -> Shape:
        items = self.node.get("items")
        return shape_of(items) if isinstance(items, dict) else DEDUCED


def shape_of(node: dict[str, Any]) -> Shape:
    if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
        return DEDUCED
    return OpenApiShape(node)


@dataclass(frozen=True)
class CoreShape(Shape):
    """A core/v1 value, known by the name of the field that holds it."""

    name: str = ""

    def is_struct(self) -> bool:
        return self.name not in _CORE_MAPS

    def declares(self, key: str) -> bool:
        return self.is_struct()

    def field(self, key: str) -> Shape:
        return CoreShape(key) if self.is_struct() else CoreShape()

    def list_type(self) -> tuple[str, tuple[str, ...]]:
        if self.name in _CORE_SETS:
            return SET, ()
        if self.name in MERGE_KEYS:
            return MAP, (MERGE_KEYS[self.name],)
        return ATOMIC, ()

    def item(self) -> Shape:
        return CoreShape(self.name + "[]")


@dataclass(frozen=True)
class RootShape(Shape):
    """A kind's object: apiVersion, kind, ObjectMeta, and the rest from its schema."""

    body: Shape

    def is_struct(self) -> bool:
        return True

    def declares(self, key: str) -> bool:
        return key in ("apiVersion", "kind", "metadata") or self.body.declares(key)

    def field(self, key: str) -> Shape:
        if key == "metadata":
            return CoreShape("metadata")
        return self.body.field(key)


def root_shape(kind_name: str) -> Shape:
    """The shape of a whole object of this kind."""
    crd = crds.schema(kind_name)
    return RootShape(shape_of(crd) if crd is not None else CoreShape())
