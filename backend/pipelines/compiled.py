"""Compile a pipeline to a pinned file, and load one back with a clear error when it is not one.

The compiled files are committed (lesson step 12): manifests/pipeline.yaml for a cluster and
manifests/pipeline-local.yaml for the embedded cluster (the same pipeline; its volume task is a
lightweight component because kfp.local cannot run kfp-kubernetes CreatePVC). Compiling is
deterministic: the same definition gives the same bytes, so `git diff` shows real changes only.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from backend.models import ManifestError, yaml_documents
from backend.pipelines.images import MANIFESTS
from training.atomic import write_atomic

COMPILED_FILES = {"kube": MANIFESTS / "pipeline.yaml", "local": MANIFESTS / "pipeline-local.yaml"}
# What kfp.local can run: lightweight Python components, started through KFP's executor module.
_EXECUTOR_MODULE = "kfp.dsl.executor_main"
_REQUIRED_KEYS = ("pipelineInfo", "root", "components", "deploymentSpec", "schemaVersion")

_HEADER = """\
# The lesson's pipeline "{pipeline}", compiled for
# {where}.
# Written by `kfcockpit pipeline compile` from backend/pipelines/definition.py: do not edit by hand,
# change the definition and compile again (compiling twice gives the same bytes).
"""
_WHERE = {
    "kube": "a cluster's Pipelines endpoint (kfp-kubernetes CreatePVC makes the volume)",
    "local": "kfp.local on the embedded cluster (a lightweight task makes the volume;\n"
             "# kfp.local ignores the platform settings)",
}


def compile_pipeline(path: Path | str, pipeline: str = "lesson", target: str = "kube") -> Path:
    """Compile one of `definition.PIPELINES` for `target` ("kube" or "local") to `path`."""
    from kfp import compiler

    from backend.pipelines.definition import PIPELINES

    if pipeline not in PIPELINES:
        raise ManifestError(f"unknown pipeline {pipeline!r} (choose from {', '.join(PIPELINES)})")
    path = Path(path)
    func = PIPELINES[pipeline](target)
    with tempfile.TemporaryDirectory(prefix="kfcockpit-compile-") as tmp:
        raw = Path(tmp) / "pipeline.yaml"
        compiler.Compiler().compile(func, str(raw))
        text = _HEADER.format(pipeline=pipeline, where=_WHERE[target]) + raw.read_text()
    write_atomic(path, text)
    return path


class Parameter(BaseModel):
    type: str  # STRING, NUMBER_INTEGER, NUMBER_DOUBLE, BOOLEAN, LIST, STRUCT
    default: Any = None
    optional: bool = False


class CompiledPipeline(BaseModel):
    """What the cockpit needs to know about a compiled pipeline file before running it."""

    path: str
    name: str
    description: str = ""
    sdk_version: str = ""
    parameters: dict[str, Parameter] = Field(default_factory=dict)
    tasks: list[str] = Field(default_factory=list)
    images: list[str] = Field(default_factory=list)
    # Executors kfp.local refuses (container components such as kfp-kubernetes CreatePVC).
    container_executors: list[str] = Field(default_factory=list)
    # CPU/memory requests and limits, per executor (in the pipeline spec itself).
    resources: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # The Kubernetes platform spec (the second YAML document), per executor.
    platform: dict[str, Any] = Field(default_factory=dict)

    @property
    def runs_locally(self) -> bool:
        return not self.container_executors

    def check_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Arguments by the pipeline's parameter types; ManifestError names the first bad one."""
        checked = {}
        for key, value in arguments.items():
            if key not in self.parameters:
                raise ManifestError(f"pipeline {self.name} has no parameter {key!r} "
                                    f"(parameters: {', '.join(self.parameters) or 'none'})")
            checked[key] = _coerce(key, value, self.parameters[key].type)
        missing = [k for k, p in self.parameters.items() if not p.optional and k not in checked]
        if missing:
            raise ManifestError(f"pipeline {self.name} needs a value for {', '.join(missing)}")
        return checked


def _coerce(key: str, value: Any, kind: str) -> Any:
    import json

    try:
        if kind == "NUMBER_INTEGER":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind == "NUMBER_DOUBLE":
            return float(value)
        if kind == "BOOLEAN":
            if isinstance(value, str):
                if value.lower() not in ("true", "false"):
                    raise ValueError
                return value.lower() == "true"
            return bool(value)
        if kind in ("LIST", "STRUCT"):
            parsed = json.loads(value) if isinstance(value, str) else value
            if not isinstance(parsed, list if kind == "LIST" else dict):
                raise ValueError
            return parsed
        return str(value)
    except (ValueError, TypeError):
        want = {"NUMBER_INTEGER": "an integer", "NUMBER_DOUBLE": "a number", "BOOLEAN": "true or false",
                "LIST": "a JSON list", "STRUCT": "a JSON object"}.get(kind, "a string")
        raise ManifestError(f"parameter {key}: {value!r} is not {want}") from None


def load_compiled(path: Path | str) -> CompiledPipeline:
    """Read a compiled KFP v2 pipeline; ManifestError in one line if the file is not one."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such file (compile one with `kfcockpit pipeline compile`)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    docs = yaml_documents(text, str(path))
    spec = docs[0] if docs else None
    missing = [k for k in _REQUIRED_KEYS if not isinstance(spec, dict) or k not in spec]
    if missing:
        raise ManifestError(f"{path}: not a compiled KFP pipeline (no {', '.join(missing)}); "
                            "compile one with `kfcockpit pipeline compile`")
    try:
        return _describe(path, spec, docs[1:])
    except (AttributeError, KeyError, TypeError) as exc:
        raise ManifestError(f"{path}: a malformed KFP pipeline spec ({type(exc).__name__}: {exc})") from None


def _describe(path: Path, spec: dict, rest: list) -> CompiledPipeline:
    executors = spec["deploymentSpec"].get("executors") or {}
    containers = {name: e.get("container") or {} for name, e in executors.items()}
    root_inputs = ((spec["root"].get("inputDefinitions") or {}).get("parameters") or {})
    platform: dict[str, Any] = {}
    for doc in rest:
        kube = ((doc or {}).get("platforms") or {}).get("kubernetes") or {}
        platform.update((kube.get("deploymentSpec") or {}).get("executors") or {})
    return CompiledPipeline(
        path=str(path),
        name=spec["pipelineInfo"]["name"],
        description=spec["pipelineInfo"].get("description", ""),
        sdk_version=str(spec.get("sdkVersion", "")),
        parameters={k: Parameter(type=v.get("parameterType", "STRING"), default=v.get("defaultValue"),
                                 optional=bool(v.get("isOptional")))
                    for k, v in root_inputs.items()},
        tasks=sorted((spec["root"].get("dag") or {}).get("tasks") or {}),
        images=sorted({c.get("image", "") for c in containers.values()} - {""}),
        container_executors=sorted(name for name, c in containers.items() if not any(
            _EXECUTOR_MODULE in part for part in (c.get("command") or []) + (c.get("args") or []))),
        resources={name: c["resources"] for name, c in containers.items() if c.get("resources")},
        platform=platform,
    )
