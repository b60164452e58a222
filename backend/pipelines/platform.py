"""Kubernetes platform settings declared in the pipeline definition itself (lesson step 11).

Requests and limits, the checkpoint volume mount, a node selector and the image pull policy are
set on each task with the KFP SDK and kfp-kubernetes, so they live in the compiled file and come
back on every run, for anyone and for CI, instead of being patched onto a cluster by hand.
kfp.local ignores all of them (it runs each task as a local process); the cockpit says so.

The TrainJob's worker pods get the same worker resources and node selector through the TrainJob
the train component submits (`resourcesPerNode`, a runtime patch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Where the checkpoint volume appears in every pod that mounts it (workers and tasks alike).
MOUNT_PATH = "/checkpoints"
# Present on every Linux node (kind and minikube included), so the selector is real yet satisfiable.
NODE_SELECTOR = {"kubernetes.io/os": "linux"}
# The pinned image is loaded into the cluster (`kind load docker-image`), never pulled.
PULL_POLICY = "IfNotPresent"

IGNORED_LOCALLY = ("kfp.local ignores the pipeline's platform settings (CPU/memory requests and "
                   "limits, volume mounts, node selector, image pull policy): each task runs as a "
                   "local process; on the embedded cluster the tasks reach the volume through the "
                   "cluster's store instead")


@dataclass(frozen=True)
class Resources:
    cpu_request: str
    cpu_limit: str
    memory_request: str
    memory_limit: str

    def as_k8s(self) -> dict[str, dict[str, str]]:
        """The core/v1 ResourceRequirements shape (what a TrainJob's resourcesPerNode takes)."""
        return {"requests": {"cpu": self.cpu_request, "memory": self.memory_request},
                "limits": {"cpu": self.cpu_limit, "memory": self.memory_limit}}


# Tasks that only talk to the platform (submit, wait, list, snapshot, compare, print).
CONTROL = Resources(cpu_request="100m", cpu_limit="500m", memory_request="256Mi", memory_limit="1Gi")
# Tasks and pods that train. Where this lesson would ask for a GPU
# (task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1), or nvidia.com/gpu: 1 in
# resourcesPerNode), a CPU request stands in: the local cluster has no GPU. Half a CPU per worker
# lets two workers and the control plane fit on a two-core kind node.
WORKER = Resources(cpu_request="500m", cpu_limit="1", memory_request="512Mi", memory_limit="2Gi")
# The Ray Train task runs its driver and all its workers in one pod: room to burst to two CPUs.
RAY_TASK = Resources(cpu_request="500m", cpu_limit="2", memory_request="1Gi", memory_limit="3Gi")


@dataclass(frozen=True)
class TaskPlatform:
    resources: Resources
    mount_volume: bool = False
    node_selector: dict[str, str] = field(default_factory=lambda: dict(NODE_SELECTOR))
    pull_policy: str = PULL_POLICY


def apply(task, platform: TaskPlatform, volume=None):
    """Declare `platform` on a pipeline task; `volume` is the PVC name (a string or the volume
    task's output channel), mounted at MOUNT_PATH when `platform.mount_volume`."""
    from kfp import kubernetes

    r = platform.resources
    task.set_cpu_request(r.cpu_request).set_cpu_limit(r.cpu_limit)
    task.set_memory_request(r.memory_request).set_memory_limit(r.memory_limit)
    for label, value in sorted(platform.node_selector.items()):
        kubernetes.add_node_selector(task, label_key=label, label_value=value)
    kubernetes.set_image_pull_policy(task, platform.pull_policy)
    if platform.mount_volume:
        if volume is None:
            raise ValueError(f"task {task.name} mounts the checkpoint volume but none was given")
        kubernetes.mount_pvc(task, pvc_name=volume, mount_path=MOUNT_PATH)
    return task
