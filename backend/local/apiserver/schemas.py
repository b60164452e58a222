"""The core kinds' JSON schemas, from the `kubeflow_trainer_api` models (upstream's OpenAPI of
the core/v1 types Kubeflow Trainer embeds), made once per installed version of that package and
kept in the user's cache directory. The custom resources' schemas are their CRDs' own (crds/).

Making them imports the whole package and walks every model: about two seconds of CPU, which on
the API server's event loop would stall every watch and pod. So a child process makes them
(`python -m backend.local.apiserver.schemas FILE`) while the server starts, and requests that
validate or describe a kind wait for them (`ready()`); the next start reads the cached file.
Each API server holds its own `CoreSchemas`: the wait is a task of its event loop, and nothing
outlives the server.
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


RunChild = Callable[[list[str]], Awaitable[int]]  # argv -> exit code


class CoreSchemas:
    """The core kinds' schemas of one API server, which owns them: made or read on its event loop
    (`start`), awaited by its requests (`ready`), gone with it. At most one per kind of MODELS,
    whatever the cache file holds."""

    def __init__(self) -> None:
        self._schemas: dict[str, dict[str, Any]] = {}
        self._warming: asyncio.Task | None = None

    def __len__(self) -> int:
        return len(self._schemas)

    def _load(self, path: Path) -> bool:
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(found, dict):
            return False
        self._schemas.update({kind: found[kind] for kind in MODELS if kind in found})
        return True

    async def _warm(self, run_child: RunChild) -> None:
        path = cache_file()
        if self._load(path):
            return
        code = await run_child([sys.executable, "-m", "backend.local.apiserver.schemas", str(path)])
        if code != 0 or not self._load(path):
            log.warning("schemas could not be made in a child process (exit %s); made on first use instead", code)

    def start(self, run_child: RunChild) -> None:
        """Begin making (or reading) the schemas without blocking the loop. `run_child` runs the
        maker the way its process runs children (the controller reaps its own: no asyncio watcher
        thread may exist in a process that forks)."""
        if self._warming is None:
            self._warming = asyncio.get_running_loop().create_task(self._warm(run_child))

    async def ready(self) -> None:
        if self._warming is not None:
            await asyncio.shield(self._warming)

    def schema(self, kind_name: str) -> dict[str, Any] | None:
        """A kind's JSON schema (with `$defs`), or None when none is shipped."""
        if kind_name not in MODELS:
            return None
        if kind_name not in self._schemas and not self._load(cache_file()):
            # Not warmed and never made (a test's server, or the child failed): made here, once.
            self._schemas.update({k: v for k, v in make(cache_file()).items() if k not in self._schemas})
        return self._schemas[kind_name]


def make(target: Path) -> dict[str, dict[str, Any]]:
    """Build the schemas and keep them in `target` for the next server (kept or not)."""
    from training.atomic import write_atomic

    made = build()
    try:
        write_atomic(target, json.dumps(made).encode())
    except OSError as exc:
        log.warning("schemas not cached in %s: %s", target, exc)
    return made


def main(argv: list[str]) -> int:
    make(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
