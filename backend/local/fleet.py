"""The cluster's nodes on this machine, as kind runs several nodes on one: one kubelet per Node of the
shape (shape.py), each with its allocatable, its GPUs (node/devices.py), its cgroups and its
labels; and what only a machine can do to a node: fail it and restore it.

- A node's resources: what `cluster up --cpus/--memory` chose, else this machine's CPUs and its
  memory less what the rest of it keeps (the kubelet's --system-reserved: a quarter, at least
  1 GiB). Every node offers them, as each of kind's nodes reports the host's: the nodes share
  the machine, the scheduler places pods among them by what each node offers, and each node's
  pods together never hold more memory than its allocatable (node/limits.py).
- `fail(node)`: the machine is lost: its kubelet stops, every process of its pods ends at once,
  nothing more is reported and its Lease is no longer renewed. What follows is the control
  plane's: the node lifecycle controller's, the taint eviction's, the Jobs'.
- `restore(node)`: the machine is back: a new kubelet registers the node (Ready again) and finds
  the pods its previous run left, as a kubelet does after a reboot.

Built and owned by the composition root (controller.py); a pod's log and processes are served by
the kubelet of its node.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from pathlib import Path
from typing import AsyncIterator, Callable

from backend.errors import InvalidResource, NotFound
from backend.local import shape as shapes
from backend.local.node import confine, devices, metrics, pidns
from backend.local.node.kubelet import Kubelet
from backend.local.node.limits import PodCgroups
from backend.local.node.network import Network
from backend.local.registry.client import Client
from backend.local.registry.events import Record
from backend.local.registry.kinds import Kind
from backend.local.registry.status import bad_request
from backend.processes import Children
from backend.quantity import quantity

log = logging.getLogger("kfcockpit.controller")

SYSTEM_RESERVED, MIN_SYSTEM_RESERVED = 0.25, float(1 << 30)  # of the machine's memory, kept from pods


def node_resources(shape: shapes.Shape, gpus: int) -> tuple[dict[str, str], dict[str, str]]:
    """A node's capacity (this machine's CPUs and memory, its pod slots and GPUs) and allocatable
    (what the shape chose, else the capacity less what the machine keeps)."""
    cpu, memory = float(os.cpu_count() or 1), float(metrics.meminfo().get("MemTotal", 0))
    allocatable_cpu = quantity(shape.cpus) if shape.cpus else cpu
    allocatable_memory = quantity(shape.memory) if shape.memory else \
        max(0.0, memory - max(MIN_SYSTEM_RESERVED, memory * SYSTEM_RESERVED))

    def resources(cores: float, size: float) -> dict[str, str]:
        found = {"cpu": f"{int(cores)}" if cores == int(cores) else f"{int(cores * 1000)}m",
                 "memory": f"{int(size) // 1024}Ki", "pods": str(shape.max_pods), "ephemeral-storage": "0"}
        if gpus:
            found[devices.RESOURCE] = str(gpus)
        return found
    return resources(max(cpu, allocatable_cpu), max(memory, allocatable_memory)), \
        resources(allocatable_cpu, allocatable_memory)


class Fleet:
    def __init__(self, shape: shapes.Shape, root: Path, client: Client, children: Children, network: Network,
                 record: Record, claim_dir: Callable[[str, str], Path], api_port: Callable[[], int],
                 ray_temp: Callable[[], Path]):
        self.shape, self.root, self.client = shape, root, client
        names = shape.node_names()
        found = devices.machine_gpus() if shape.gpus_per_node else []
        self.gpus = devices.plan(shape.gpus_per_node, names, found)
        self.machine_has_gpus = bool(found)
        tag = hashlib.sha1(str(root).encode()).hexdigest()[:12]  # noqa: S324 - a name, not a secret
        unconfined = confine.available()
        if unconfined:  # said once: every pod of every node runs so
            log.warning("pods are not confined (%s): each sees this machine's files, its volumes only "
                        "where a path in its command or env names them", unconfined)
        shared_pids = unconfined or pidns.available()
        if shared_pids and not unconfined:
            log.warning("pods share this machine's PID namespace (%s): a pod can reach another's files "
                        "through /proc/PID/root", shared_pids)

        def kubelet(name: str, index: int) -> Kubelet:
            capacity, allocatable = node_resources(shape, len(self.gpus[name]))
            cgroups = self.cgroups.get(name) or PodCgroups.find(f"{tag}-{index}",
                                                                memory_max=int(quantity(allocatable["memory"])))
            self.cgroups[name] = cgroups
            return Kubelet(client, name, root, claim_dir, capacity, children, network, cgroups, record,
                           shape.pod_max_pids, api_port=api_port, ray_temp=ray_temp, allocatable=allocatable,
                           labels=devices.labels(self.gpus[name]),
                           devices=devices.Devices(self.gpus[name], self.machine_has_gpus),
                           lease_renew=shape.lease_renew_seconds, confined=not unconfined,
                           own_pids=not shared_pids)

        self.cgroups: dict[str, PodCgroups] = {}
        self._make = {name: (lambda n=name, i=i: kubelet(n, i)) for i, name in enumerate(names)}
        self.kubelets: dict[str, Kubelet] = {name: make() for name, make in self._make.items()}
        self.tasks: dict[str, asyncio.Task] = {}
        self.zygotes = None
        self.cpu_rates = metrics.CpuRates()  # metrics.k8s.io's previous readings, this process's

    @property
    def names(self) -> list[str]:
        return list(self.kubelets)

    @property
    def simulated_gpus(self) -> bool:
        return any(g.simulated for found in self.gpus.values() for g in found)

    def start(self) -> None:
        for name in self.kubelets:
            self._start(name)

    def _start(self, name: str) -> None:
        kubelet = self.kubelets[name]
        kubelet.zygotes = self.zygotes
        self.tasks[name] = asyncio.create_task(kubelet.run(), name=f"kubelet {name}")

    def set_zygotes(self, zygotes) -> None:
        self.zygotes = zygotes
        for kubelet in self.kubelets.values():
            kubelet.zygotes = zygotes

    def _known(self, name: str) -> None:
        if name not in self.kubelets:
            raise NotFound(f"node {name!r} not found (the nodes: {', '.join(self.kubelets)})")

    async def fail(self, name: str) -> str:
        """The machine of node `name` is lost (see the module's doc)."""
        self._known(name)
        task = self.tasks.get(name)
        if task is None or task.done():
            raise InvalidResource(f"node {name} has failed already (kfcockpit node restore {name} brings it back)")
        pods = len(self.kubelets[name].workers)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        log.warning("node %s failed: its kubelet stopped and the processes of its %d pod(s) ended", name, pods)
        return f"node {name} failed: its {pods} pod(s)' processes ended, its kubelet stopped posting status"

    def restore(self, name: str) -> str:
        self._known(name)
        task = self.tasks.get(name)
        if task is not None and not task.done():
            raise InvalidResource(f"node {name} is running (it has not failed)")
        self.kubelets[name] = self._make[name]()
        self._start(name)
        log.info("node %s restored: a new kubelet registers it", name)
        return f"node {name} restored: its kubelet registers it Ready again"

    def failed(self) -> list[str]:
        return [name for name in self.kubelets if name not in self.tasks or self.tasks[name].done()]

    async def stop(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        for cgroups in self.cgroups.values():
            cgroups.close()

    # ------------------------------------------------------------------ what the API server asks

    def kubelet(self, node: str | None) -> Kubelet | None:
        """The running kubelet of a node (None for a node failed or unknown)."""
        kubelet = self.kubelets.get(node or "")
        return kubelet if kubelet is not None and node not in self.failed() else None

    def pod_log(self, pod: dict, options: dict[str, str]) -> AsyncIterator[bytes]:
        """pods/log, served by the kubelet of the pod's node (as kube-apiserver asks that node's)."""
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise bad_request(f'pod {pod["metadata"]["name"]} does not have a host assigned')
        kubelet = self.kubelet(node)
        if kubelet is None:
            raise bad_request(f"Get \"https://{node}:10250/containerLogs/{pod['metadata']['namespace']}/"
                              f"{pod['metadata']['name']}\": node {node} does not answer (it failed)"
                              if node in self.names else f"no kubelet of node {node} runs here")
        return kubelet.logs(pod, options)

    def metrics(self, kind: Kind, namespace: str | None) -> list[dict]:
        """metrics.k8s.io, as each node's kubelet (its summary API) reports it."""
        if kind.kind == "NodeMetrics":
            return [metrics.node_metrics(name, self.cpu_rates) for name in self.names if self.kubelet(name) is not None]
        readings = (metrics.pod_metrics(p, self.pod_pid(p), self.cpu_rates) for p in self.client.list("Pod", namespace))
        return [m for m in readings if m is not None]

    def pod_pid(self, pod: dict) -> int | None:
        kubelet = self.kubelet((pod.get("spec") or {}).get("nodeName"))
        meta = pod["metadata"]
        return kubelet.pod_pid(meta["namespace"], meta["name"]) if kubelet is not None else None
