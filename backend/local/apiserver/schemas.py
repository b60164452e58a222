"""The core kinds' JSON schemas, from the `kubeflow_trainer_api` models (upstream's OpenAPI of
the core/v1 types Kubeflow Trainer embeds), made once per installed version of that package and
kept in the user's cache directory. The custom resources' schemas are their CRDs' own (crds/).

Making them imports the whole package and walks every model: about two seconds of CPU, which on
the API server's event loop would stall every watch and pod. So a child process makes them
(`python -m backend.local.apiserver.schemas FILE`) while the server starts, and requests that
validate or describe a kind wait for them (`ready()`); the next start reads the cached file.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

log = logging.getLogger("kfcockpit.apiserver")

MODELS = {
    "Pod": "io_k8s_api_core_v1_pod.IoK8sApiCoreV1Pod",
    "ConfigMap": "io_k8s_api_core_v1_config_map.IoK8sApiCoreV1ConfigMap",
    "Secret": "io_k8s_api_core_v1_secret.IoK8sApiCoreV1Secret",
    "Namespace": "io_k8s_api_core_v1_namespace.IoK8sApiCoreV1Namespace",
    "Event": "io_k8s_api_core_v1_event.IoK8sApiCoreV1Event",
    "Node": "io_k8s_api_core_v1_node.IoK8sApiCoreV1Node",
    "PersistentVolumeClaim": "io_k8s_api_core_v1_persistent_volume_claim.IoK8sApiCoreV1PersistentVolumeClaim",
    "ServiceAccount": "io_k8s_api_core_v1_service_account.IoK8sApiCoreV1ServiceAccount",
}

_schemas: dict[str, dict[str, Any]] = {}
_warming: asyncio.Task | None = None


def build() -> dict[str, dict[str, Any]]:
    found = {}
    for kind, target in MODELS.items():
        module, cls = target.rsplit(".", 1)
        model = getattr(importlib.import_module(f"kubeflow_trainer_api.models.{module}"), cls)
        found[kind] = model.model_json_schema(by_alias=True)
    return found


def cache_file() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kfcockpit"
    try:
        version = importlib.metadata.version("kubeflow_trainer_api")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return base / f"schemas-core-kubeflow_trainer_api-{version}.json"


def _load(path: Path) -> bool:
    try:
        _schemas.update(json.loads(path.read_text()))
        return True
    except (OSError, ValueError):
        return False


RunChild = Callable[[list[str]], Awaitable[int]]  # argv -> exit code


async def _warm(run_child: RunChild) -> None:
    path = cache_file()
    if _load(path):
        return
    code = await run_child([sys.executable, "-m", "backend.local.apiserver.schemas", str(path)])
    if code != 0 or not _load(path):
        log.warning("schemas could not be made in a child process (exit %s); made on first use instead", code)


def start(run_child: RunChild) -> None:
    """Begin making (or reading) the schemas without blocking the loop. `run_child` runs the
    maker the way its process runs children (the controller reaps its own: no asyncio watcher
    thread may exist in a process that forks)."""
    global _warming
    if _warming is None:
        _warming = asyncio.get_running_loop().create_task(_warm(run_child))


async def ready() -> None:
    if _warming is not None:
        await asyncio.shield(_warming)


def schema(kind_name: str) -> dict[str, Any] | None:
    """A kind's JSON schema (with `$defs`), or None when none is shipped."""
    if kind_name not in MODELS:
        return None
    if kind_name not in _schemas:  # not warmed (a test, or the child failed): make it here
        _schemas.update({k: v for k, v in build().items() if k not in _schemas})
    return _schemas[kind_name]


def main(argv: list[str]) -> int:
    from training.atomic import write_atomic

    target = Path(argv[0])
    write_atomic(target, json.dumps(build()).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
