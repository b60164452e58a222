"""The embedded cluster's shape, chosen at `kfcockpit cluster up` and kept in the state root
(`cluster.json`): how many nodes, what each offers (CPUs, memory, pod slots, GPUs), and the node
lifecycle's timings, each under the flag of the real component that has one:

    --nodes N                                    (kind: one container per node)
    --gpus-per-node G|auto                       (what the NVIDIA device plugin advertises per node)
    --cpus, --memory                             (a node's allocatable, the kubelet's --system-reserved)
    --max-pods                                   (kubelet --max-pods, 110)
    --pod-max-pids                               (kubelet --pod-max-pids: processes and threads
                                                  per pod; upstream unlimited, here 1024)
    --node-monitor-grace-period                  (kube-controller-manager, 50s since v1.32,
                                                  kubernetes/kubernetes#126287)
    --default-not-ready-toleration-seconds,
    --default-unreachable-toleration-seconds     (kube-apiserver's DefaultTolerationSeconds
                                                  admission plugin, 300)
    --forceful-termination-grace-period          (Kueue's FailureRecoveryPolicy, 1m: a pod stuck
                                                  Terminating on an unreachable node is failed
                                                  and removed this long after its deletion time)

The defaults are upstream's; the lesson's cluster (what a state root gets before anyone chose:
LESSON) has two nodes, so the lesson's two workers run on two, and short timings, so a node
failure plays out in seconds rather than minutes. `cluster up` changes only what it is given.

Imports nothing heavy: the CLI checks its flags with it before anything loads, and a bad value is
one line (InvalidResource) before anything starts or is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from backend.errors import InvalidResource

AUTO = "auto"
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Shape:
    nodes: int = 1
    gpus_per_node: int | str = 0  # a count, or "auto": this machine's GPUs shared out among the nodes
    cpus: str | None = None  # a node's allocatable CPUs (a quantity); None: this machine's
    memory: str | None = None  # a node's allocatable memory; None: this machine's less what it keeps
    max_pods: int = 110
    pod_max_pids: int = 1024  # upstream's -1 (unlimited) would let one pod fork the machine away
    node_monitor_grace_period: float = 50.0
    default_not_ready_toleration_seconds: int = 300
    default_unreachable_toleration_seconds: int = 300
    forceful_termination_grace_period: float = 60.0

    def check(self) -> Shape:
        """This shape, or InvalidResource naming the first value no cluster could have."""
        if not isinstance(self.nodes, int) or self.nodes < 1:
            raise InvalidResource(f"--nodes {self.nodes}: a cluster needs at least one node")
        if self.nodes > 64:
            raise InvalidResource(f"--nodes {self.nodes}: the embedded cluster runs at most 64 nodes on one machine; "
                                  "use a real cluster for more")
        gpus = self.gpus_per_node
        if gpus != AUTO and (not isinstance(gpus, int) or gpus < 0):
            raise InvalidResource(f"--gpus-per-node {gpus}: a node has 0 or more GPUs (or `auto`)")
        for flag, value in (("--cpus", self.cpus), ("--memory", self.memory)):
            if value is not None:
                _positive_quantity(flag, value)
        if not isinstance(self.max_pods, int) or self.max_pods < 1:
            raise InvalidResource(f"--max-pods {self.max_pods}: a node holds at least one pod")
        if not isinstance(self.pod_max_pids, int) or self.pod_max_pids < 1:
            raise InvalidResource(f"--pod-max-pids {self.pod_max_pids}: a pod runs at least one process")
        if self.node_monitor_grace_period <= 0:
            raise InvalidResource(f"--node-monitor-grace-period {self.node_monitor_grace_period:g}s: must be more "
                                  "than 0")
        for flag, value in (("--default-not-ready-toleration-seconds", self.default_not_ready_toleration_seconds),
                            ("--default-unreachable-toleration-seconds", self.default_unreachable_toleration_seconds),
                            ("--forceful-termination-grace-period", self.forceful_termination_grace_period)):
            if value < 0:
                raise InvalidResource(f"{flag} {value:g}: must be 0 or more")
        return self

    def node_names(self) -> list[str]:
        """kind's names for its worker nodes: kfcockpit-worker, kfcockpit-worker2, ..."""
        return [f"kfcockpit-worker{i + 1 if i else ''}" for i in range(self.nodes)]

    @property
    def lease_renew_seconds(self) -> float:
        """How often a kubelet renews its node's Lease: upstream every 10 s (a quarter of its
        40 s nodeLeaseDurationSeconds), here at most a fifth of the grace period, so a short
        grace never takes a live node for a lost one."""
        return min(10.0, self.node_monitor_grace_period / 5)

    def timings(self) -> str:
        """The node lifecycle's timings, as flags, for a person reading a measurement."""
        return (f"--node-monitor-grace-period {seconds(self.node_monitor_grace_period)} "
                f"--default-unreachable-toleration-seconds {self.default_unreachable_toleration_seconds} "
                f"--forceful-termination-grace-period {seconds(self.forceful_termination_grace_period)}")


# The cluster a state root gets until `cluster up` says otherwise: the lesson's.
LESSON = Shape(nodes=2, gpus_per_node=AUTO, node_monitor_grace_period=4.0, default_not_ready_toleration_seconds=2,
               default_unreachable_toleration_seconds=2, forceful_termination_grace_period=1.0)


def duration(text: str, flag: str = "") -> float:
    """A Go duration as the components' flags take it ("40s", "1m30s", "500ms"), or plain seconds;
    `flag` names where it came from in the one line a bad one gets."""
    value = str(text).strip()
    try:
        return float(value)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise InvalidResource(f"{flag + ' ' if flag else ''}{text!r} is not a duration (e.g. 40s, 1m30s, 500ms)")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def seconds(value: float) -> str:
    return f"{value:g}s"


def gpus(text: str) -> int | str:
    """--gpus-per-node's value: a count, or auto."""
    if str(text).strip().lower() == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise InvalidResource(f"--gpus-per-node {text!r}: a number of GPUs, or auto") from None


def _positive_quantity(flag: str, text: str) -> None:
    from backend.quantity import quantity

    try:
        if quantity(text) <= 0:
            raise ValueError("must be more than 0")
    except ValueError as exc:
        raise InvalidResource(f"{flag} {text!r} is not a resource quantity ({exc})") from None


def load(path: Path) -> Shape:
    """The shape kept at `path`, LESSON where none was chosen; the older node.json (CPUs and
    memory only) beside it still counts."""
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict):
        known = {f.name for f in fields(Shape)}
        try:
            return replace(LESSON, **{k: v for k, v in kept.items() if k in known}).check()
        except (InvalidResource, TypeError):
            return LESSON
    try:
        older = json.loads((path.parent / "node.json").read_text())
        return replace(LESSON, cpus=_number(older.get("cpu")), memory=_number(older.get("memory")),
                       max_pods=int(older.get("pods") or LESSON.max_pods)).check()
    except (OSError, ValueError, TypeError, AttributeError, InvalidResource):
        return LESSON


def _number(value) -> str | None:
    return None if not value else f"{float(value):g}"


def save(path: Path, shape: Shape) -> None:
    from training.atomic import write_atomic

    write_atomic(path, json.dumps(asdict(shape.check()), indent=1))
