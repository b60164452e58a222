"""The vendored CRDs, loaded once: each kind's group, version, names, scope and its schema.

Loading is lazy (the first admission or OpenAPI request reads the files, ~1.5 MB of JSON, a few
tens of milliseconds) and cached for the life of the process.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from backend.local.registry.crds.refresh import DATA
from backend.local.registry.crds.sources import SOURCES


@dataclass(frozen=True)
class Crd:
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    subresources: tuple[str, ...]
    schema: dict[str, Any]  # the openAPIV3Schema, as upstream wrote it
    source: dict[str, str]  # repo, tag, path, commit

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def qualified_kind(self) -> str:
        """`TrainJob.trainer.kubeflow.org`, as apierrors.NewInvalid names a GroupKind."""
        return f"{self.kind}.{self.group}"


@functools.cache
def crd(kind: str) -> Crd | None:
    """The vendored CRD of `kind`, or None for a kind without one (core kinds)."""
    source = SOURCES.get(kind)
    if source is None:
        return None
    doc = json.loads((DATA / source.data_name).read_text())
    return Crd(kind=doc["names"]["kind"], group=doc["group"], version=doc["version"], plural=doc["names"]["plural"],
               namespaced=doc["scope"] == "Namespaced", subresources=tuple(doc["subresources"]),
               schema=doc["schema"], source=doc["source"])


def kinds() -> tuple[str, ...]:
    return tuple(SOURCES)
