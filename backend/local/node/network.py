"""The pod network of one machine: every pod is 127.0.0.1, so a pod's DNS name resolves there, and
the port a group of pods meets on is given one of its own.

On a cluster each pod has its own address: JobSet's pods meet their rank 0 at its DNS name
(`<job>-node-0-0.<job>`, through the JobSet's headless service) on the Trainer's port 29500, and
a restarted group meets a new pod there. Here they share loopback, so the address a pod's
PET_MASTER_ADDR (or MASTER_ADDR) names becomes 127.0.0.1 and its port becomes a port of that
group's own: one per (namespace, address, port, restart attempt), free when it is first asked
for, the same for every pod of the group (whichever node's kubelet asks), and new for each
attempt (torchrun's store reused by a restarted group often hangs).

The pod network is loopback, so the collective libraries are told to listen there
(GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME): left to choose, gloo listens on the address this
machine's name resolves to, which on most machines is its LAN address.

Ports are taken below the kernel's ephemeral range (as torchrun's 29500 is): ephemeral ports
are what every other store binds with port 0 and what outgoing connections use, so one picked
from there may be taken before rank 0 binds it, or still be dialled by another group's workers
retrying their dead store, which would then join this group's rendezvous.
"""

from __future__ import annotations

import random
import socket
from collections import OrderedDict

from backend.errors import ClusterError

ADDRESS = "127.0.0.1"
ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
_PAIRS = (("PET_MASTER_ADDR", "PET_MASTER_PORT"), ("MASTER_ADDR", "MASTER_PORT"))
_KEPT = 4096  # groups whose port is remembered (the oldest forgotten first)
# What every pod is told about the network its collectives meet on.
LOOPBACK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}


def _rendezvous_ports() -> range:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(20000, low) if low > 21000 else range(high + 1, 65536)


def free_port() -> int:
    ports = _rendezvous_ports()
    for _ in range(200):
        port = random.choice(ports)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((ADDRESS, port))  # no SO_REUSEADDR: also refuses ports in TIME_WAIT
            except OSError:
                continue
            return port
    raise ClusterError("no free rendezvous port found outside the ephemeral range")


class Network:
    def __init__(self) -> None:
        self._ports: OrderedDict[tuple, int] = OrderedDict()

    def port(self, namespace: str, address: str, port: str, attempt: str) -> int:
        key = (namespace, address, port, attempt)
        if key not in self._ports:
            self._ports[key] = free_port()
            while len(self._ports) > _KEPT:
                self._ports.popitem(last=False)
        return self._ports[key]

    def resolve(self, pod: dict, env: dict[str, str]) -> dict[str, str]:
        """`env` with each rendezvous address naming a pod (a dotted DNS name) turned to this
        machine's, its port to the group's own, and the collectives kept on loopback."""
        meta = pod["metadata"]
        attempt = (meta.get("labels") or {}).get(ATTEMPT_LABEL, "0")
        resolved = {**env, **LOOPBACK_ENV}
        for addr_var, port_var in _PAIRS:
            address = env.get(addr_var, "")
            if "." not in address or address.replace(".", "").isdigit():
                continue  # an IP, or a name that is not a pod's
            resolved[addr_var] = ADDRESS
            if env.get(port_var, "").isdigit():
                resolved[port_var] = str(self.port(meta.get("namespace", ""), address, env[port_var], attempt))
        return resolved
