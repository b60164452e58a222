"""What the cockpit observes of the cluster's nodes and of its Events, whatever the platform: a
Node as `kubectl describe node` sums it up (Ready, cordoned, taints, allocatable, and what the pods
bound to it request), and a core/v1 Event as `kubectl get events` lists it. The nodes view and the
failure timeline read these; where they come from (a Node watch beside a pod watch, an Event
watch) is the backend's."""

from __future__ import annotations

from pydantic import BaseModel, Field

from backend.models.observed import PodEventType

GPU = "nvidia.com/gpu"  # the NVIDIA device plugin's extended resource


class Taint(BaseModel):
    key: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute
    value: str = ""
    added: float | None = None  # epoch seconds (timeAdded: NoExecute taints only)

    @property
    def text(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


class NodeSummary(BaseModel):
    name: str
    ready: str = "Unknown"  # the Ready condition's status: True, False or Unknown
    ready_reason: str = ""  # e.g. KubeletReady, NodeStatusUnknown
    ready_message: str = ""
    ready_since: float | None = None  # the Ready condition's lastTransitionTime
    unschedulable: bool = False  # cordoned (spec.unschedulable)
    taints: list[Taint] = Field(default_factory=list)
    gpus: int = 0  # allocatable nvidia.com/gpu
    cpu: float = 0.0  # allocatable cores
    memory: float = 0.0  # allocatable bytes
    max_pods: int = 0
    gpus_used: int = 0  # requested by the unfinished pods bound to it
    cpu_requested: float = 0.0
    memory_requested: float = 0.0
    pods: int = 0  # unfinished pods bound to it


class NodeEvent(BaseModel):
    type: PodEventType  # ADDED, MODIFIED, DELETED
    node: NodeSummary


class ClusterEvent(BaseModel):
    """A core/v1 Event (an occurrence the control plane recorded about an object)."""

    reason: str  # e.g. NodeNotReady, TaintManagerEviction
    message: str = ""
    type: str = "Normal"  # Normal or Warning
    kind: str = ""  # the involved object's
    name: str = ""
    namespace: str = ""
    source: str = ""  # the component that recorded it (node-controller, kubelet…)
    first: float | None = None  # epoch seconds
    last: float | None = None
    count: int = 1
