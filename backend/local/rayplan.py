"""From a RayJob to what its driver pod runs: command, env, mounts, names, the expected workers.

KubeRay runs a RayJob's entrypoint on the Ray cluster's head node (through `ray job submit`), so
the embedded cluster runs it as the job's driver pod with the head container's env and PVC mounts
(emulated as for TrainJobs: `podspec.rewrite_mounts`), plus the runtimeEnvYAML's env_vars. The
entrypoint is split like a shell would split it, but no shell runs it: pipes, `&&`, `;` and
redirections are refused at apply. The driver starts its own Ray on 127.0.0.1 with its temp
files under `<home>/ray` (RAY_TMPDIR).

How many workers to expect and how often Ray may restart them are read from the entrypoint when
it runs `training.ray_train` (--num-workers, --max-failures); for any other driver the worker
pods simply appear as they start.

Pure functions, no processes here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from backend.cluster import InvalidResource
from backend.local import podspec
from backend.raytrain.entrypoint import ray_train_args
from training.options import option_value
from backend.models import (
    RAY_LABEL_CLUSTER,
    RAY_LABEL_GROUP,
    RAY_LABEL_NODE_TYPE,
    RAY_LABEL_ORIGINATED_CRD,
    RAY_LABEL_ORIGINATED_NAME,
    RayJob,
)
from training.ray_train import DEFAULT_MAX_FAILURES, DEFAULT_NUM_WORKERS

# How the controller reads a driver's output: each forwarded worker line prefixed with the pid
# that printed it, `(RayTrainWorker pid=42) step=3 ...`, without colour, every line kept.
LOG_FORMAT_ENV = {
    "RAY_DISABLE_WORKER_LOG_PREFIX": "0",
    "RAY_COLOR_PREFIX": "0",
    "RAY_DEDUP_LOGS": "0",
}
_SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ";;", ">", ">>", "<", "<<", "(", ")", "2>", "2>&1"}
_MAX_NAME = 63


@dataclass(frozen=True)
class RayPlan:
    """A RayJob resolved, as the controller runs it."""

    name: str
    argv: list[str]  # the entrypoint, split
    env: dict[str, str]  # head container env, then runtimeEnvYAML env_vars
    mounts: list[tuple[str, str]]  # (claim, mount path) of the head container
    image: str
    num_workers: int  # 0: not known (the entrypoint is not training.ray_train)
    max_failures: int
    ignored: list[str]  # runtimeEnvYAML keys the embedded cluster does not apply

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict) -> "RayPlan":
        return cls(**dict(data, mounts=[tuple(m) for m in data["mounts"]]))


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
    longest = worker_pod_name(name, max(num_workers - 1, 0), suffix="xxxxx")
    if len(longest) > _MAX_NAME:
        raise InvalidResource(
            f"RayJob {name}: name too long, its pod names ({longest}) would exceed {_MAX_NAME} "
            f"characters; use at most {len(name) - (len(longest) - _MAX_NAME)}")
    return RayPlan(name=name, argv=argv, env=env, mounts=job.volume_mounts(),
                   image=(head.image if head else None) or "", num_workers=num_workers,
                   max_failures=max_failures, ignored=sorted(k for k in runtime_env if k != "env_vars"))


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


def ray_cluster_name(job: str) -> str:
    """The job's Ray cluster, as status.rayClusterName and label ray.io/cluster name it. KubeRay
    makes `<job>-<5 random chars>` (utils.GenerateRayClusterName); the embedded cluster keeps no
    RayCluster object, so a fixed suffix keeps the name stable across controller restarts."""
    return f"{job}-raycluster"


def kuberay_labels(job: RayJob, role: str) -> dict[str, str]:
    """The labels KubeRay v1.7.0 puts on a RayJob's pods, for a pod of `role` "driver" or "worker".

    Cluster pods (ray-operator/controllers/ray/common/pod.go labelPod): is-ray-node, cluster,
    node-type, group, identifier, app.kubernetes.io/name and created-by. The submitter Job's pod
    (rayjob_controller.go getSubmitterTemplate, createNewK8sJob: a Job named after the RayJob)
    names the RayJob in ray.io/originated-from-*. The driver pod plays both the head (where KubeRay
    runs the entrypoint) and the submitter (whose log carries the driver's output), so it has both.
    """
    name = job.metadata.name
    cluster = ray_cluster_name(name)
    if role == "driver":
        node_type, group = "head", "headgroup"
    else:
        groups = job.spec.ray_cluster_spec.worker_group_specs if job.spec.ray_cluster_spec else []
        node_type, group = "worker", (groups[0].group_name if groups else "workers")
    labels = {"ray.io/is-ray-node": "yes", RAY_LABEL_CLUSTER: cluster, RAY_LABEL_NODE_TYPE: node_type,
              RAY_LABEL_GROUP: group, "ray.io/identifier": f"{cluster}-{node_type}",
              "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
    if role == "driver":
        labels.update({RAY_LABEL_ORIGINATED_NAME: name, RAY_LABEL_ORIGINATED_CRD: "RayJob",
                       "batch.kubernetes.io/job-name": name, "job-name": name})
    return labels


def driver_pod_name(job: str, suffix: str | None = None) -> str:
    """`<job>-driver-<5 random chars>`: the pod that runs the entrypoint."""
    return f"{job}-driver-{suffix or podspec.random_suffix()}"


def worker_pod_name(job: str, rank: int, suffix: str | None = None) -> str:
    """`<job>-worker-<rank>-<5 random chars>`: one Ray Train worker of one group."""
    return f"{job}-worker-{rank}-{suffix or podspec.random_suffix()}"


def driver_launch(plan: RayPlan, pod: str, cluster_root: Path, mounts: dict[str, str],
                  ray_temp: Path) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of the driver pod; `mounts` maps each mount path to the directory backing it."""
    env = podspec.base_env()
    env.update({k: podspec.rewrite_mounts(v, mounts) for k, v in plan.env.items()})
    env.update(LOG_FORMAT_ENV)
    env.update({
        "RAY_TMPDIR": str(ray_temp),  # Ray's sessions and lock files: under the state root
        podspec.ENV_CLUSTER: str(cluster_root),
        podspec.ENV_POD: pod,
    })
    return [podspec.rewrite_mounts(a, mounts) for a in plan.argv], env
