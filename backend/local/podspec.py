"""From a TrainJob and its runtime to what each worker pod runs: command, env, mounts, names.

Pure functions (no processes here), so the rules a pod is built by are easy to read and test.

Mounts are emulated by rewriting paths: a volume mounted at /checkpoints lives in
<state root>/cluster/volumes/<claim>, and every argument, env value and command word that names
/checkpoints or a path below it (at the start, or after '=', ':' or ',') is rewritten to that
directory. Processes see the same files a container would at the mount path.
"""

from __future__ import annotations

import os
import re
import secrets
import string
import sys
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

from backend import project
from backend.cluster import InvalidResource
from backend.local.apiserver import crds
from backend.models import TRAINER_CONTAINER, TrainJob, TrainingRuntime

# Pods run the interpreter and console scripts of this environment ("the image").
VENV_BIN = str(Path(sys.executable).parent)
# The image's working directory, so `-m training.ddp` resolves.
PROJECT_ROOT = str(project.PROJECT_ROOT)

# Annotation that turns warm start off for a job: its pods then run the command exactly (torchrun).
WARM_ANNOTATION = "kfcockpit.io/warm-start"
# Every pod process (and everything it starts) carries these, so no descendant can hide.
ENV_CLUSTER = "KFCOCKPIT_CLUSTER"
ENV_POD = "KFCOCKPIT_POD"

# Host variables a pod inherits; everything else comes from the manifests, as in a container.
_INHERITED = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TZ")
# Variables read while torch/numpy are imported: a warm worker's zygote must have had the same.
_IMPORT_TIME = re.compile(r"^(OMP_|MKL_|OPENBLAS_|KMP_|GOMP_|TORCH_|PYTORCH_|CUDA_|NCCL_|LD_|PYTHON|MALLOC_)")
_POD_SUFFIX = string.ascii_lowercase + string.digits
_MAX_NAME = 63


@dataclass(frozen=True)
class JobPlan:
    """A TrainJob resolved against its runtime, as the controller runs it."""

    name: str
    num_nodes: int
    num_proc_per_node: int
    max_restarts: int
    image: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    mounts: list[tuple[str, str]]  # (claim, mount path)
    warm_allowed: bool = True
    # A pod's terminationGracePeriodSeconds: SIGTERM, then SIGKILL this much later (upstream's
    # default, 30 s); survivors of a failed group use it to save the step they are at.
    grace_seconds: float = 30.0
    requests: dict = field(default_factory=dict)  # each pod's resource requests, for the scheduler
    deadline_seconds: float | None = None  # the TrainJob's activeDeadlineSeconds
    namespace: str = "default"
    # ConfigMap and Secret volumes of the trainer container: (kind, name, mount path)
    projected: list = field(default_factory=list)
    restart_policy: str = "OnFailure"  # the pods' (JobSet's default where the runtime sets none)

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict) -> "JobPlan":
        data = dict(data, mounts=[tuple(m) for m in data["mounts"]])
        return cls(**data)


@dataclass
class LaunchSpec:
    """One pod's process: what to exec (cold), or what a warm worker runs in-process."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    warm: tuple[str, str, list[str]] | None = None  # ("module"|"script", target, argv tail)
    warm_env: dict[str, str] = field(default_factory=dict)  # the env torchrun gives its worker
    zygote_key: tuple[tuple[str, str], ...] = ()


Resolve = Callable[[str, str], "dict[str, str] | None"]  # (ConfigMap|Secret, name) -> its data


def _no_objects(kind: str, name: str) -> None:
    return None


def _env_value(item: dict, resolve: Resolve) -> str | None:
    """An EnvVar's value: literal, or from a ConfigMap or Secret key (core/v1 EnvVarSource)."""
    if item.get("value") is not None:
        return str(item["value"])
    source = item.get("valueFrom")
    if not source:
        return None
    for key_ref, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
        ref = source.get(key_ref)
        if ref:
            data = resolve(kind, ref.get("name", ""))
            if data is not None and ref.get("key") in data:
                return data[ref["key"]]
            if ref.get("optional"):
                return None
            what = f"{kind.lower()} {ref.get('name')!r} not found" if data is None else \
                f"key {ref.get('key')!r} not found in {kind.lower()} {ref.get('name')!r}"
            raise InvalidResource(f"env {item['name']}: {what} (CreateContainerConfigError)")
    raise InvalidResource(f"env {item['name']}: valueFrom {', '.join(source)} is not supported by the embedded "
                          "cluster (configMapKeyRef and secretKeyRef are)")


def _env_from(sources: list, resolve: Resolve) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in sources:
        for ref_field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            ref = source.get(ref_field)
            if ref:
                data = resolve(kind, ref.get("name", ""))
                if data is None and not ref.get("optional"):
                    raise InvalidResource(f"envFrom: {kind.lower()} {ref.get('name')!r} not found "
                                          "(CreateContainerConfigError)")
                env.update({f"{source.get('prefix', '')}{k}": v for k, v in (data or {}).items()})
    return env


def env_of(container: dict, resolve: Resolve) -> dict[str, str]:
    """A container's environment: envFrom first, then env (which wins), as the kubelet builds it."""
    env = _env_from(container.get("envFrom") or [], resolve)
    for item in container.get("env") or []:
        value = _env_value(item, resolve) if isinstance(item, dict) and "name" in item else None
        if value is not None:
            env[item["name"]] = value
    return env


def projected_source(volume: dict) -> tuple[str, str] | None:
    """(ConfigMap|Secret, name) a volume projects as files, or None for other volume types."""
    if "configMap" in volume:
        return "ConfigMap", volume["configMap"].get("name", "")
    if "secret" in volume:
        return "Secret", volume["secret"].get("secretName", "")
    return None


def _projected_volumes(job: TrainJob, runtime: TrainingRuntime, containers: list[dict]) -> list[list[str]]:
    """[kind, name, mount path] of each ConfigMap or Secret volume the trainer container mounts."""
    volumes = {v.get("name"): v for v in runtime.pod_spec().get("volumes") or []}
    for patch in job.pod_patches():
        volumes.update({v.name: v.to_manifest() for v in patch.volumes})
    found = []
    for container in containers:
        for mount in container.get("volumeMounts") or []:
            source = projected_source(volumes.get(mount.get("name")) or {})
            if source is not None:
                found.append([*source, mount["mountPath"]])
    return found


def check_plan(job: TrainJob, runtime: TrainingRuntime) -> tuple[list[str], list[str]]:
    """(command, args) of the job's pods, or InvalidResource for what no pod of it could run
    (checked at admission, before anything is stored)."""
    name = job.metadata.name
    longest_pod = pod_name(name, 0, suffix="xxxxx")
    if len(longest_pod) > _MAX_NAME:
        raise InvalidResource(
            f"TrainJob {name}: name too long, its pod names ({longest_pod}) would exceed "
            f"{_MAX_NAME} characters; use at most {len(name) - (len(longest_pod) - _MAX_NAME)}")
    trainer = job.spec.trainer
    container = runtime.trainer_container()
    command = list(trainer.command or container.get("command") or [])
    args = list(trainer.args if trainer.command or trainer.args else container.get("args") or [])
    if not command:
        raise InvalidResource(f"TrainJob {name}: no command (set spec.trainer.command or the "
                              f"runtime's '{TRAINER_CONTAINER}' container command)")
    return command, args


def plan_job(job: TrainJob, runtime: TrainingRuntime, resolve: Resolve = _no_objects) -> JobPlan:
    """`resolve` finds the ConfigMaps and Secrets the containers' env refers to."""
    command, args = check_plan(job, runtime)
    name = job.metadata.name
    trainer = job.spec.trainer
    container = runtime.trainer_container()
    containers = [container] + [c.to_manifest() for p in job.pod_patches() for c in p.containers
                                if c.name == TRAINER_CONTAINER]
    env = env_of(container, resolve)
    env.update(env_of({"env": [e.to_manifest() for e in trainer.env]}, resolve))
    for patched in containers[1:]:
        env.update(env_of(patched, resolve))
    warm = job.metadata.annotations.get(WARM_ANNOTATION, "true").lower() not in ("false", "0", "no")
    grace = runtime.pod_spec().get("terminationGracePeriodSeconds")
    upstream = (job.to_manifest(), runtime.to_manifest())  # what the Trainer and JobSet make of them
    per_node = trainer.resources_per_node
    requests = dict(per_node.requests) if per_node is not None else dict(
        (container.get("resources") or {}).get("requests") or {})
    return JobPlan(
        name=name,
        num_nodes=trainer.num_nodes or runtime.num_nodes(),
        num_proc_per_node=crds.procs_per_node(*upstream),
        max_restarts=runtime.max_restarts(),
        image=trainer.image or container.get("image") or "",
        command=command,
        args=args,
        env=env,
        mounts=job.volume_mounts(),
        warm_allowed=warm,
        grace_seconds=float(grace) if isinstance(grace, (int, float)) and grace >= 0 else 30.0,
        requests={k: str(v) for k, v in requests.items()},
        deadline_seconds=job.spec.active_deadline_seconds,
        namespace=job.metadata.namespace or "default",
        projected=_projected_volumes(job, runtime, containers),
        restart_policy=crds.node_pod_spec(*upstream).get("restartPolicy") or "OnFailure",
    )


def pod_name(job: str, rank: int, suffix: str | None = None) -> str:
    """`<job>-node-0-<index>-<5 random chars>`, as JobSet names the pods of replicated job `node`."""
    return f"{job}-node-0-{rank}-{suffix or random_suffix()}"


def random_suffix() -> str:
    """The 5 random characters that end a pod's name, new for every pod."""
    return "".join(secrets.choice(_POD_SUFFIX) for _ in range(5))


def base_env() -> dict[str, str]:
    """What every pod process starts from: a few host variables, this environment's `bin` first
    on PATH, the project importable, output unbuffered (what the base image sets)."""
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env["PATH"] = os.pathsep.join([VENV_BIN, os.environ.get("PATH", "/usr/bin:/bin")])
    env["PYTHONPATH"] = PROJECT_ROOT
    env["PYTHONUNBUFFERED"] = "1"  # lines reach the log as printed
    return env


def rewrite_mounts(value: str, mounts: dict[str, str]) -> str:
    """Replace each mount path (as a whole path prefix) by the directory that backs it."""
    for mount_path in sorted(mounts, key=len, reverse=True):
        pattern = re.compile(r"(^|[=:,])" + re.escape(mount_path.rstrip("/")) + r"(?=/|$|[:,])")
        value = pattern.sub(lambda m, to=mounts[mount_path]: m.group(1) + to, value)
    return value


def launch_spec(plan: JobPlan, rank: int, port: int, pod: str, cluster_root: Path,
                mounts: dict[str, str]) -> LaunchSpec:
    """The process of pod `rank` of a group whose rendezvous is 127.0.0.1:`port`.

    `mounts` maps each mount path to the directory backing it."""
    env = base_env()
    env.update({k: rewrite_mounts(v, mounts) for k, v in plan.env.items()})
    env.update({  # what Kubeflow Trainer's torch plugin gives every node
        "PET_NNODES": str(plan.num_nodes),
        "PET_NPROC_PER_NODE": str(plan.num_proc_per_node),
        "PET_NODE_RANK": str(rank),
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": str(port),
        ENV_CLUSTER: str(cluster_root),
        ENV_POD: pod,
    })
    argv = [rewrite_mounts(a, mounts) for a in plan.command + plan.args]
    spec = LaunchSpec(argv=argv, env=env, cwd=PROJECT_ROOT)
    target = warm_target(argv) if plan.warm_allowed and plan.num_proc_per_node == 1 else None
    if target is not None:
        spec.warm = target
        spec.zygote_key = zygote_key(env)
        spec.warm_env = dict(env, **torchrun_worker_env(plan.num_nodes, rank, port, env))
    return spec


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


def torchrun_worker_env(nnodes: int, node_rank: int, port: int, env: dict[str, str]) -> dict[str, str]:
    """What torchrun's agent sets for its one worker on node `node_rank` (static rendezvous,
    one process per node; see torch/distributed/elastic/agent/server/local_elastic_agent.py)."""
    return {
        "RANK": str(node_rank),
        "LOCAL_RANK": "0",
        "GROUP_RANK": str(node_rank),
        "ROLE_RANK": str(node_rank),
        "ROLE_NAME": "default",
        "LOCAL_WORLD_SIZE": "1",
        "WORLD_SIZE": str(nnodes),
        "GROUP_WORLD_SIZE": str(nnodes),
        "ROLE_WORLD_SIZE": str(nnodes),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": "none",
        # No agent: rank 0 hosts the store itself, as in a plain env:// launch.
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }


def zygote_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables a zygote must have been started with for its forks to behave like a fresh
    interpreter of this env (thread pools and allocators read them at import)."""
    return tuple(sorted((k, v) for k, v in env.items()
                        if _IMPORT_TIME.match(k) and not k.startswith("TORCHELASTIC_")))
