"""What the cluster did about its nodes, for the failure timeline (tui/model/timeline.py): each node's
Ready condition and taints as they changed (the node watch), and the Events the control plane
recorded about a restart's pods and its JobSet (the Event watch). Kept as plain data, timed, and
read per restart, so a node failure is narrated in the order upstream's controllers act:

- kubernetes pkg/controller/nodelifecycle: no heartbeat for --node-monitor-grace-period, and the
  node's Ready condition is Unknown (NodeStatusUnknown; its NodeNotReady Event), then the
  `node.kubernetes.io/unreachable` NoExecute taint (doNoExecuteTaintingPass);
- pkg/controller/tainteviction: each pod's tolerationSeconds later, TaintManagerEviction
  ("Marking for deletion Pod …"); Kueue's failure recovery (KueueForcefullyDeleted) ends a pod
  stuck Terminating there;
- the Job controller deleting the failed group's pods (SuccessfulDelete: the one on the lost node
  stays Terminating, no kubelet confirms it), JobSet's failure policy
  (RestartJobSetFailurePolicyAction), the scheduler placing the new pods (FailedScheduling while
  no node fits);
- and a node back (the kubelet's NodeReady): Ready True, its taints gone.

Their times are whole seconds, placed as pod facts' are (`when`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from tui.model.format import short_name

if TYPE_CHECKING:
    from backend.models import ClusterEvent, NodeSummary

NO_EXECUTE = "NoExecute"
# Pod Events the timeline tells (the rest, Scheduled, Started…, the pod facts already say).
POD_REASONS = {
    "TaintManagerEviction": "down",  # tainteviction: marked for deletion, or the deletion cancelled
    "KueueForcefullyDeleted": "down",  # Kueue's FailureRecoveryPolicy
    "FailedScheduling": "info",  # the scheduler found no node for a new pod
}
JOBSET_REASONS = ("RestartJobSetFailurePolicyAction", "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction")
JOB_DELETED = "SuccessfulDelete"  # the Job controller's "Deleted pod: <name>"
KEPT = 2000  # occurrences kept, the newest (an API server keeps about as many Events)


@dataclass(frozen=True)
class NodeMoment:
    at: float
    node: str
    what: str
    kind: str = "info"  # as timeline.Moment's kinds, and "cordon" (told whether or not a restart follows)
    lost: bool = False  # the node stopped being Ready here


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of an Event (a repeat of an aggregated one is another occurrence)."""

    at: float
    reason: str
    kind: str
    name: str
    message: str


def when(stamp: float | None, seen_at: float) -> float:
    """When a fact the cluster stamped happened: Kubernetes keeps pod, condition, taint and Event
    times to the whole second (metav1.Time), the log lines they are ordered with to the
    microsecond. A fact seen within the second its stamp names happened just now, so the moment it
    was seen is the finer time; an older stamp (listed when the cockpit joined) is all there is."""
    if stamp is None:
        return seen_at
    return seen_at if stamp == int(stamp) and 0 <= seen_at - stamp < 1.0 else stamp


def _taints(node: "NodeSummary") -> dict[tuple[str, str], float | None]:
    return {(t.key, t.effect): t.added for t in node.taints}


@dataclass
class NodeHistory:
    last: dict[str, "NodeSummary"] = field(default_factory=dict)
    moments: list[NodeMoment] = field(default_factory=list)
    occurrences: deque[Occurrence] = field(default_factory=lambda: deque(maxlen=KEPT))
    _counts: dict[tuple, int] = field(default_factory=dict)  # an Event's count last told

    def node_seen(self, node: "NodeSummary", seen_at: float) -> bool:
        """Whether it changed what the timeline tells. A node first seen already not Ready (the
        cockpit joined after its failure) is told from its condition's and taints' own times."""
        before = self.last.get(node.name)
        self.last[node.name] = node
        told = len(self.moments)
        if before is None and node.ready != "True":
            self._ready_changed(node, node.ready_since or seen_at)
        elif before is not None and before.ready != node.ready:
            self._ready_changed(node, when(node.ready_since, seen_at))
        had = _taints(before) if before is not None else {}
        now = _taints(node)
        for (key, effect), added in now.items():
            if (key, effect) not in had and effect == NO_EXECUTE:  # the taints that evict
                at = when(added, seen_at) if before is not None else added or seen_at
                self.moments.append(NodeMoment(at, node.name, f"node {node.name} tainted {key}:{effect}", "down"))
        for key, effect in had:
            if (key, effect) not in now and effect == NO_EXECUTE:
                self.moments.append(NodeMoment(seen_at, node.name, f"node {node.name}: taint {key}:{effect} "
                                               "taken off", "up"))
        if before is not None and before.unschedulable != node.unschedulable:
            self.moments.append(NodeMoment(seen_at, node.name, f"node {node.name} "
                                           f"{'cordoned' if node.unschedulable else 'uncordoned'}", "cordon"))
        return len(self.moments) != told

    def _ready_changed(self, node: "NodeSummary", at: float) -> None:
        if node.ready == "True":
            self.moments.append(NodeMoment(at, node.name, f"node {node.name} Ready again", "up"))
            return
        why = f" ({node.ready_reason}: {node.ready_message})" if node.ready_reason else ""
        self.moments.append(NodeMoment(at, node.name, f"node {node.name} Ready {node.ready}{why}", "failure",
                                       lost=True))

    def event_seen(self, event: "ClusterEvent", seen_at: float) -> bool:
        """Whether it is one the timeline tells (a repeat of an aggregated Event counts again)."""
        told = (event.kind == "Pod" and event.reason in POD_REASONS) or (
            event.kind == "JobSet" and event.reason in JOBSET_REASONS) or (
            event.kind == "Job" and event.reason == JOB_DELETED)
        key = (event.kind, event.name, event.reason, event.message)
        at = event.last or event.first
        if not told or at is None or self._counts.get(key, 0) >= event.count:
            return False
        self._counts.pop(key, None)
        self._counts[key] = event.count  # the newest last: the oldest go first
        if len(self._counts) > KEPT:
            del self._counts[next(iter(self._counts))]
        self.occurrences.append(Occurrence(when(at, seen_at), event.reason, event.kind, event.name, event.message))
        return True

    # ------------------------------------------------------------------ read per restart

    def lost(self, nodes: Iterable[str], since: float, until: float) -> NodeMoment | None:
        """The first of these nodes to stop being Ready in [since, until)."""
        found = [m for m in self.moments if m.lost and m.node in nodes and since <= m.at < until]
        return min(found, key=lambda m: m.at, default=None)

    def told(self, nodes: Iterable[str], pods: Iterable[str], job: str | None, since: float,
             until: float) -> list[tuple[float, str, str]]:
        """(time, what, kind) of what happened to these nodes, pods and the job's JobSet in
        [since, until)."""
        nodes, pods = set(nodes), set(pods)
        told = [(m.at, m.what, m.kind) for m in self.moments if m.node in nodes and since <= m.at < until]
        for o in self.occurrences:
            # A stamp names the second it happened in (seen late, it is all there is): one that
            # may have happened at `since` or after is told, no earlier than `since`.
            if not since - 1 < o.at < until:
                continue
            at = max(o.at, since)
            if o.kind == "Pod" and o.name in pods:
                told.append((at, f"{o.reason}: {o.message}", POD_REASONS[o.reason]))
            elif o.kind == "JobSet" and o.name == job:
                told.append((at, f"JobSet restarts the group: {o.reason}", "down"))
            elif o.kind == "Job" and (pod := o.message.removeprefix("Deleted pod: ")) in pods:
                told.append((at, f"Job deleted pod {short_name(pod, job)} ({o.reason})", "down"))
        return told
