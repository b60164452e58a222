"""YAML/JSON documents as typed declared resources, or a ManifestError in one line; and the fields a
parsed resource carries beyond what the cockpit models (what strict field validation would list).
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BaseModel, Field, ValidationError

from backend.errors import ManifestError
from backend.models.core import KubeModel, PersistentVolumeClaim, VolumeSnapshot
from backend.models.rayjob import RayJob
from backend.models.trainer import TrainingRuntime, TrainJob


def unknown_fields(model: BaseModel, path: str = "") -> list[str]:
    """Dotted paths of fields a parsed resource carries beyond what the cockpit models, the way
    an API server's strict field validation would list them."""
    found = [f"{path}{key}" for key in (model.__pydantic_extra__ or {})]
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        key = f"{path}{info.alias or name}"
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, KubeModel):
                found += unknown_fields(item, f"{key}[{i}]." if isinstance(value, list) else f"{key}.")
    return found


Resource = Annotated[
    Union[TrainJob, TrainingRuntime, PersistentVolumeClaim, VolumeSnapshot, RayJob],
    Field(discriminator="kind"),
]
KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "PersistentVolumeClaim", "VolumeSnapshot", "RayJob")


class _Doc(BaseModel):
    resource: Resource


def parse_resource(doc: Any, where: str = "manifest") -> Any:
    """One YAML/JSON document as a typed resource, or ManifestError in one line."""
    if not isinstance(doc, dict):
        raise ManifestError(f"{where}: expected a mapping with apiVersion and kind")
    kind = doc.get("kind")
    if kind not in KINDS:
        raise ManifestError(f"{where}: unsupported kind {kind!r} (supported: {', '.join(KINDS)})")
    try:
        return _Doc.model_validate({"resource": doc}).resource
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"][2:]) or "(document)"
        message = first["msg"].removeprefix("Value error, ")
        name = (doc.get("metadata") or {}).get("name", "?")
        raise ManifestError(f"{where}: {kind} {name}: {path}: {message}") from None


def yaml_documents(text: str, source: str = "manifest") -> list[Any]:
    """The non-empty documents of a (multi-document) YAML text, or ManifestError in one line."""
    import yaml

    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise ManifestError(f"{source}: not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None


def parse_manifests(text: str, source: str = "manifest") -> list[Any]:
    """Every document of a (multi-document) YAML text; empty documents are skipped."""
    docs = yaml_documents(text, source)
    if not docs:
        raise ManifestError(f"{source}: no documents")
    return [parse_resource(d, f"{source} (document {i + 1})") for i, d in enumerate(docs)]
