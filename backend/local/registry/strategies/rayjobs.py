"""The RayJob strategy: KubeRay v1.7's ray.io/v1 RayJob as the embedded cluster can run it, and the
plan its controller runs it by (controllers/rayjob.py).

KubeRay runs a RayJob's entrypoint on the Ray cluster's head node (through `ray job submit`), so
the embedded cluster runs it as the job's driver pod with the head container's image, env and
mounts, plus the runtimeEnvYAML's env_vars. The entrypoint is split like a shell would split it,
but no shell runs it. How many Ray Train workers to expect and how often Ray may restart them are
read from the entrypoint when it runs `training.ray_train` (--num-workers, --max-failures).

What this cluster cannot run is refused at once, in one line, rather than failing later: a
clusterSelector (no long-lived RayCluster here), an entrypoint that needs a shell, pod names over
63 characters, a state root too long for Ray's socket paths (`check_state_root`, the host's).
The models check the rest of its shape (backend/models/rayjob.py). Its spec changes only in
`suspend` while it runs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Callable

from backend.errors import InvalidResource
from backend.local.registry import admission
from backend.local.registry.upstream import kuberay
from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError
from backend.local.registry.strategy import Obj, Reader, Strategy
from backend.models import RayJob
from backend.raytrain.entrypoint import ray_train_args
from training.options import option_value
from training.ray_train import DEFAULT_MAX_FAILURES, DEFAULT_NUM_WORKERS

_SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ";;", ">", ">>", "<", "<<", "(", ")", "2>", "2>&1"}
_MAX_NAME = 63


@dataclass(frozen=True)
class RayPlan:
    """A RayJob resolved, as its driver pod runs it."""

    argv: list[str]  # the entrypoint, split
    env: dict[str, str]  # head container env, then runtimeEnvYAML env_vars
    num_workers: int  # 0: not known (the entrypoint is not training.ray_train)
    max_failures: int
    ignored: list[str]  # runtimeEnvYAML keys the embedded cluster does not apply


def worker_pod_prefix(job: str, rank: int) -> str:
    """`<job>-worker-<rank>-` (and 5 random characters): one Ray Train worker of one group."""
    return f"{job}-worker-{rank}-"


def plan_rayjob(job: RayJob) -> RayPlan:
    name = job.metadata.name
    if job.spec.ray_cluster_spec is None:
        raise InvalidResource(f"RayJob {name}: clusterSelector runs the job on an existing RayCluster, which "
                              "the embedded cluster does not have; give spec.rayClusterSpec")
    argv = split_entrypoint(name, job.spec.entrypoint)
    env: dict[str, str] = {}
    head = job.head_container()
    if head is not None:
        env.update({e.name: e.value for e in head.env if e.value is not None})
    runtime_env = job.runtime_env()
    env.update({str(k): str(v) for k, v in (runtime_env.get("env_vars") or {}).items()})
    num_workers, max_failures = _ray_train_counts(name, argv)
    longest = worker_pod_prefix(name, max(num_workers - 1, 0)) + "xxxxx"
    if len(longest) > _MAX_NAME:
        raise InvalidResource(
            f"RayJob {name}: name too long, its pod names ({longest}) would exceed {_MAX_NAME} "
            f"characters; use at most {len(name) - (len(longest) - _MAX_NAME)}")
    return RayPlan(argv=argv, env=env, num_workers=num_workers, max_failures=max_failures,
                   ignored=sorted(k for k in runtime_env if k != "env_vars"))


def split_entrypoint(job: str, entrypoint: str) -> list[str]:
    try:
        argv = shlex.split(entrypoint)
    except ValueError as exc:
        raise InvalidResource(f"RayJob {job}: entrypoint cannot be split into words: {exc}") from None
    bad = [word for word in argv if word in _SHELL_OPERATORS or "$(" in word or "`" in word]
    if bad:
        raise InvalidResource(f"RayJob {job}: the embedded cluster runs the entrypoint without a shell; "
                              f"write it as one command (found {bad[0]!r})")
    return argv


def _ray_train_counts(job: str, argv: list[str]) -> tuple[int, int]:
    """(workers, max failures) of a `python -m training.ray_train ...` entrypoint; (0, 0) otherwise."""
    args = ray_train_args(argv)
    if args is None:
        return 0, 0
    return (_int_option(job, args, "--num-workers", DEFAULT_NUM_WORKERS),
            _int_option(job, args, "--max-failures", DEFAULT_MAX_FAILURES))


def _int_option(job: str, args: list[str], option: str, default: int) -> int:
    value = option_value(args, option)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise InvalidResource(f"RayJob {job}: entrypoint {option} {value!r} is not a whole number") from None


class RayJobStrategy(Strategy):
    def __init__(self, kind: Kind, check_state_root: Callable[[], None]):
        self.kind, self.check_state_root = kind, check_state_root

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        job = admission.check_model(self.kind, obj)
        if kuberay.validate_rayjob(obj) is not None:
            return []  # KubeRay refuses it (ValidationFailed, controllers/rayjob.py): it never runs here
        try:
            plan_rayjob(job)
            self.check_state_root()
        except InvalidResource as exc:
            raise ApiError(422, "Invalid", f'RayJob.ray.io "{job.metadata.name}" is invalid: {exc}') from None
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        admission.immutable_spec(self.kind, obj, old)
        return self.validate(obj, reader)
