"""From a pod's spec to the process its container runs: command, environment, mounts, and whether
it can start warm. Pure functions (no processes, no store: what a pod refers to comes through a
`Lookup`), so the rules are easy to read and test.

- Environment as the kubelet builds it: a few host variables and this environment's `bin` first
  on PATH (the "image"), then envFrom, then env (which wins); values from ConfigMaps, Secrets and
  the downward API (fieldRef: metadata.name, .namespace, .uid, .labels['k'], .annotations['k'],
  spec.nodeName, spec.serviceAccountName, status.podIP, status.hostIP); `$(VAR)` references
  expanded in values, command and args, as upstream expands them.
- Mounts are emulated by rewriting paths: a volume mounted at /checkpoints lives in a directory
  of the node, and every argument, env value and command word that names /checkpoints or a path
  below it (at the start, or after '=', ':' or ',') is rewritten to that directory.
- Warm start: `torchrun -m MOD ARGS` (or `torchrun SCRIPT.py ARGS`) with one process per node and
  no torchrun options takes all its configuration from PET_*, so the node can fork its one worker
  from a zygote with torch already imported (zygote.py) instead of exec'ing torchrun; the pod's
  annotation `kfcockpit.io/warm-start: "false"` asks for the command exactly.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from backend import project
from backend.errors import InvalidResource
from backend.quantity import quantity

# Pods run the interpreter and console scripts of this environment ("the image").
VENV_BIN = str(Path(sys.executable).parent)
# The image's working directory, so `-m training.ddp` resolves.
PROJECT_ROOT = str(project.PROJECT_ROOT)
# Every pod process (and everything it starts) carries these, so no descendant can hide. The
# cluster's is a digest of its state root: a pod is found by it without being told where the
# state (tokens, signing key, every namespace's volumes) lives.
ENV_CLUSTER = "KFCOCKPIT_CLUSTER_ID"
ENV_POD = "KFCOCKPIT_POD"

# Host variables a pod inherits; everything else comes from the manifests, as in a container.
_INHERITED = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TZ")
# Variables read while torch/numpy are imported: a warm worker's zygote must have had the same.
_IMPORT_TIME = re.compile(r"^(OMP_|MKL_|OPENBLAS_|KMP_|GOMP_|TORCH_|PYTORCH_|CUDA_|NCCL_|LD_|PYTHON|MALLOC_)")
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

Lookup = Callable[[str, str], "dict[str, str] | None"]  # (ConfigMap|Secret, name) -> its data


@dataclass
class LaunchSpec:
    """One container's process: what to exec (cold), or what a warm worker runs in-process."""

    argv: list[str]
    env: dict[str, str]
    cwd: str = PROJECT_ROOT
    warm: tuple[str, str, list[str]] | None = None  # ("module"|"script", target, argv tail)
    warm_env: dict[str, str] = field(default_factory=dict)  # the env torchrun gives its worker
    zygote_key: tuple[tuple[str, str], ...] = ()
    confine: dict | None = None  # confine.enter's plan, where pods get mount namespaces


def cluster_id(root: Path | str) -> str:
    """The value of ENV_CLUSTER for the cluster of state root `root`."""
    return hashlib.sha256(str(Path(root).absolute()).encode()).hexdigest()[:24]


def cluster_marker(root: Path | str) -> dict[str, str]:
    """What marks every process of the cluster of `root` (processes.marked_processes, sweep)."""
    return {ENV_CLUSTER: cluster_id(root)}


def base_env() -> dict[str, str]:
    """What every pod process starts from: a few host variables, this environment's `bin` first
    on PATH, the project importable, output unbuffered (what the base image sets)."""
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env["PATH"] = os.pathsep.join([VENV_BIN, os.environ.get("PATH", "/usr/bin:/bin")])
    env["PYTHONPATH"] = PROJECT_ROOT
    env["PYTHONUNBUFFERED"] = "1"  # lines reach the log as printed
    return env


def field_value(pod: dict, path: str) -> str | None:
    """The downward API's value of a fieldRef path on `pod`, or None when it names nothing."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"),
              "status.podIP": status.get("podIP") or "127.0.0.1", "status.hostIP": status.get("hostIP") or "127.0.0.1"}
    if path in simple:
        return simple[path]
    found = _FIELD.match(path)
    if found:
        return (meta.get(found.group(1)) or {}).get(found.group(2))
    return None


def _env_value(item: dict, pod: dict, lookup: Lookup) -> str | None:
    if item.get("value") is not None:
        return str(item["value"])
    source = item.get("valueFrom")
    if not source:
        return ""
    if "fieldRef" in source:
        value = field_value(pod, source["fieldRef"].get("fieldPath", ""))
        if value is None:
            raise InvalidResource(f"env {item['name']}: fieldRef {source['fieldRef'].get('fieldPath')!r} names "
                                  "nothing on this pod")
        return value
    for key_ref, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
        ref = source.get(key_ref)
        if ref:
            data = lookup(kind, ref.get("name", ""))
            if data is not None and ref.get("key") in data:
                return data[ref["key"]]
            if ref.get("optional"):
                return None
            what = f"{kind.lower()} {ref.get('name')!r} not found" if data is None else \
                f"key {ref.get('key')!r} not found in {kind.lower()} {ref.get('name')!r}"
            raise InvalidResource(f"env {item['name']}: {what}")
    raise InvalidResource(f"env {item['name']}: valueFrom {', '.join(source)} is not supported by the embedded "
                          "cluster (fieldRef, configMapKeyRef and secretKeyRef are)")


def expand(value: str, env: dict[str, str]) -> str:
    """`$(VAR)` replaced by VAR's value when defined (left as is otherwise), `$$` by `$`."""
    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))
    return _REFERENCE.sub(one, value)


def container_env(container: dict, pod: dict, lookup: Lookup) -> dict[str, str]:
    """A container's own environment: envFrom first, then env (which wins), each value expanded
    against the variables before it."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        for ref_field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            ref = source.get(ref_field)
            if ref:
                data = lookup(kind, ref.get("name", ""))
                if data is None and not ref.get("optional"):
                    raise InvalidResource(f"envFrom: {kind.lower()} {ref.get('name')!r} not found")
                env.update({f"{source.get('prefix', '')}{k}": v for k, v in (data or {}).items()})
    for item in container.get("env") or []:
        if isinstance(item, dict) and "name" in item:
            value = _env_value(item, pod, lookup)
            if value is not None:
                env[item["name"]] = expand(value, env)
    return env


def projected_source(volume: dict) -> tuple[str, str] | None:
    """(ConfigMap|Secret, name) a volume projects as files, or None for other volume types."""
    if "configMap" in volume:
        return "ConfigMap", volume["configMap"].get("name", "")
    if "secret" in volume:
        return "Secret", volume["secret"].get("secretName", "")
    return None


def memory_limit(container: dict) -> int:
    """The container's resources.limits.memory in bytes (0: none): its cgroup's memory limit."""
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    try:
        return int(quantity(str(limit))) if limit is not None else 0
    except ValueError:
        return 0


def projected_files(volume: dict, lookup: "Lookup", mint: Callable[[str, int], str]) -> dict[str, str] | None:
    """A `projected` volume's files (path -> content): each source's, in order, as the kubelet
    writes them: a ConfigMap's or Secret's keys (or its `items` at their paths) and a
    serviceAccountToken minted for its audience (`mint(audience, expirationSeconds)`, the
    TokenRequest the kubelet makes). None when a ConfigMap or Secret it names is not there."""
    files: dict[str, str] = {}
    for source in (volume.get("projected") or {}).get("sources") or []:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            files[token.get("path", "token")] = mint(token.get("audience", ""),
                                                     int(token.get("expirationSeconds") or 3600))
            continue
        kind, field = ("ConfigMap", "configMap") if "configMap" in source else ("Secret", "secret")
        if field not in source:
            continue  # downwardAPI and clusterTrustBundle are not projected here
        data = lookup(kind, source[field].get("name", ""))
        if data is None:
            if source[field].get("optional"):
                continue
            return None
        items = source[field].get("items")
        files.update({item["path"]: data[item["key"]] for item in items if item.get("key") in data} if items
                     else data)
    return files


def rewrite_mounts(value: str, mounts: dict[str, str]) -> str:
    """Replace each mount path (as a whole path prefix) by the directory that backs it."""
    for mount_path in sorted(mounts, key=len, reverse=True):
        pattern = re.compile(r"(^|[=:,])" + re.escape(mount_path.rstrip("/")) + r"(?=/|$|[:,])")
        value = pattern.sub(lambda m, to=mounts[mount_path]: m.group(1) + to, value)
    return value


def warm_target(argv: list[str]) -> tuple[str, str, list[str]] | None:
    """`torchrun -m MOD ARGS` or `torchrun SCRIPT.py ARGS` with no torchrun options: all its
    configuration then comes from PET_*, so one worker per node can be started without it."""
    if len(argv) < 3 or os.path.basename(argv[0]) != "torchrun":
        return None
    if argv[1] == "-m":
        return ("module", argv[2], argv[3:])
    if argv[1].endswith(".py") and not argv[1].startswith("-"):
        return ("script", argv[1], argv[2:])
    return None


def torchrun_worker_env(env: dict[str, str]) -> dict[str, str] | None:
    """What torchrun's agent sets for its one worker from the node's PET_* (static rendezvous, one
    process per node; torch/distributed/elastic/agent/server/local_elastic_agent.py), or None when
    the PET_* do not describe one process per node."""
    try:
        nnodes, rank, port = int(env["PET_NNODES"]), int(env["PET_NODE_RANK"]), int(env["PET_MASTER_PORT"])
    except (KeyError, ValueError):
        return None
    if env.get("PET_NPROC_PER_NODE", "1") != "1":
        return None
    address = env.get("PET_MASTER_ADDR", "127.0.0.1")
    return {
        "RANK": str(rank), "LOCAL_RANK": "0", "GROUP_RANK": str(rank), "ROLE_RANK": str(rank),
        "ROLE_NAME": "default", "LOCAL_WORLD_SIZE": "1", "WORLD_SIZE": str(nnodes),
        "GROUP_WORLD_SIZE": str(nnodes), "ROLE_WORLD_SIZE": str(nnodes),
        "MASTER_ADDR": address, "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "none",
        # No agent: rank 0 hosts the store itself, as in a plain env:// launch.
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }


def zygote_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables a zygote must have been started with for its forks to behave like a fresh
    interpreter of this env (thread pools and allocators read them at import)."""
    return tuple(sorted((k, v) for k, v in env.items()
                        if _IMPORT_TIME.match(k) and not k.startswith("TORCHELASTIC_")))


def launch_spec(argv: list[str], env: dict[str, str], warm_allowed: bool) -> LaunchSpec:
    """The process of a container whose command line (`argv`, mounts rewritten) and full
    environment are known: warm when it can be."""
    spec = LaunchSpec(argv=argv, env=env)
    target = warm_target(argv) if warm_allowed else None
    worker_env = torchrun_worker_env(env) if target is not None else None
    if target is not None and worker_env is not None:
        spec.warm = target
        spec.zygote_key = zygote_key(env)
        spec.warm_env = dict(env, **worker_env)
    return spec
