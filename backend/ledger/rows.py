"""The ledger's rows from what the platform kept (pure).

Attempts are told apart by the pods the Job controller created (its `SuccessfulCreate` Events,
"Created pod: NAME"), in order of creation, `num_nodes` at a time: under the lesson's runtime a
Job never replaces a pod within an attempt (backoffLimit 0; JobSet makes the next attempt's Jobs
anew), so each attempt's group is the next `num_nodes` pods. A pod still listed carries its
attempt in its `jobset.sigs.k8s.io/restart-attempt` label, which wins.

Why an attempt ended, the first rule that holds:
  1. one of its pods still listed failed: its rank, node, exit code (with the signal past 128)
     and reason (OOMKilled, Evicted, Error…);
  2. a node of its pods went NotReady (a `NodeNotReady` Event) while it ran: the node was lost
     (the evictions that follow are its consequence);
  3. one of its pods was evicted (`Evicted`, `TaintManagerEviction`, preemption): drained or
     preempted;
  4. one of its pods was deleted (`Killing`) and not by its Job (no "Deleted pod" from the Job
     controller, which deletes the rest of a failed group): a person or `R`;
  5. one of its pods ended with no trace left but the Job's deletion of the others: it failed,
     its exit code went with it;
  else the JobSet's failure policy restarted it.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from typing import Iterable

from backend.models import ClusterEvent, JobSummary, Pod

CREATED = re.compile(r"^Created pod: (\S+)$")
DELETED = re.compile(r"^Deleted pod: (\S+)$")
ASSIGNED = re.compile(r" to (\S+)$")  # the scheduler's "Successfully assigned ns/pod to NODE"
EVICTIONS = ("Evicted", "TaintManagerEviction", "Preempted", "Preempting")


@dataclass(frozen=True)
class FirstGroup:
    """A group of workers as its lines tell it (backend/goodput's Attempt): when it formed, and
    its first step and that step's end."""

    started: float
    first_step: int | None
    first_step_at: float | None


@dataclass(frozen=True)
class AttemptRow:
    attempt: int
    start: float | None
    first_step: int | None = None
    first_step_at: float | None = None
    end: float | None = None
    why: str = ""
    pods: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return dict(self.__dict__, pods=list(self.pods))


@dataclass(frozen=True)
class Ledger:
    job: str
    rows: tuple[AttemptRow, ...]
    restarts_used: int
    max_restarts: int
    restarts_counted: int  # of restarts_used, those the budget counts (restartsCountTowardsMax)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def restarts_left(self) -> int:
        return max(0, self.max_restarts - self.restarts_counted)


def exit_text(code: int | None) -> str:
    """'exit 137 (SIGKILL)': a code past 128 is the signal that ended the process."""
    if code is None:
        return "exit code unknown"
    if code > 128:
        try:
            return f"exit {code} ({signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exit {code}"


def rank_of_name(pod: str) -> int | None:
    """An Indexed Job's pod is `<job>-<index>-<suffix>`: its index is its node rank."""
    parts = pod.rsplit("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def _time(event: ClusterEvent) -> float:
    return event.first or event.last or 0.0


def _assign(summary: JobSummary, pods: list[Pod], events: list[ClusterEvent]) -> list[list[tuple[float, str]]]:
    """Each attempt's pods (creation time, name), attempt 0 first."""
    created: dict[str, float] = {}
    prefix = f"{summary.name}-"
    for event in events:
        found = CREATED.match(event.message) if event.kind == "Job" and event.reason == "SuccessfulCreate" else None
        if found and event.name.startswith(prefix):
            created.setdefault(found[1], _time(event))
    labelled = {p.name: p.restart_attempt for p in pods}
    for pod in pods:
        created.setdefault(pod.name, pod.created)
    attempts: list[list[tuple[float, str]]] = [[] for _ in range(summary.restart_attempt + 1)]
    width = max(1, summary.num_nodes)
    unlabelled = sorted((at, name) for name, at in created.items() if name not in labelled)
    for index, (at, name) in enumerate(unlabelled):
        if index // width < len(attempts):
            attempts[index // width].append((at, name))
    for pod in pods:
        if pod.restart_attempt < len(attempts):
            attempts[pod.restart_attempt].append((pod.created, pod.name))
    return attempts


def _why(names: set[str], listed: dict[str, Pod], events: list[ClusterEvent], start: float | None,
         end: float | None, nodes: dict[str, str]) -> str:
    failed = sorted((p for n, p in listed.items() if n in names and p.phase == "Failed"),
                    key=lambda p: p.finished or 0.0)
    if failed:
        pod = failed[0]
        reason = f", {pod.reason}" if pod.reason and pod.reason not in ("Error", "Failed") else ""
        return f"rank {pod.rank} failed: pod {pod.name} on {pod.node or '?'}, {exit_text(pod.exit_code)}{reason}"
    used = {nodes[n] for n in names if n in nodes}
    for event in events:  # before the evictions it sets off
        if (event.kind == "Node" and event.reason == "NodeNotReady" and event.name in used
                and (start is None or _time(event) >= start) and (end is None or _time(event) <= end)):
            return f"node {event.name} lost (NotReady): its ranks' pods went with it"
    mine = [e for e in events if e.kind == "Pod" and e.name in names]
    for event in mine:
        if event.reason in EVICTIONS:
            return (f"rank {rank_of_name(event.name)} evicted: pod {event.name} on {nodes.get(event.name, '?')}"
                    f" ({event.reason}: {event.message})")
    by_job = {m[1] for e in events if e.kind == "Job" for m in [DELETED.match(e.message)] if m}
    for event in mine:
        if event.reason == "Killing" and event.name not in by_job:
            return (f"rank {rank_of_name(event.name)} deleted: pod {event.name} on "
                    f"{nodes.get(event.name, '?')} (kubectl delete, a kill, or R)")
    if by_job and names & by_job:
        gone = sorted(names - by_job - set(listed))
        if gone:
            return (f"rank {rank_of_name(gone[0])} failed: pod {gone[0]} on {nodes.get(gone[0], '?')} "
                    "(its exit code went with the pod)")
    return "restarted by the JobSet's failure policy"


def build_ledger(summary: JobSummary, pods: list[Pod], events: list[ClusterEvent],
                 groups: Iterable[FirstGroup]) -> Ledger:
    groups = sorted(groups, key=lambda g: g.started)
    nodes = {}
    for event in events:
        found = ASSIGNED.search(event.message) if event.kind == "Pod" and event.reason == "Scheduled" else None
        if found:
            nodes[event.name] = found[1]
    nodes.update({p.name: p.node for p in pods if p.node})
    listed = {p.name: p for p in pods}
    assigned = _assign(summary, pods, events)
    starts = [min((at for at, _ in group), default=None) for group in assigned]
    if starts and starts[0] is None:
        starts[0] = summary.created
    rows, taken = [], []
    for attempt, group in enumerate(assigned):
        start = starts[attempt]
        later = [s for s in starts[attempt + 1:] if s is not None]
        end = later[0] if later else summary.finished
        # the API's times are to the second, the lines' to the microsecond: a second's slack
        first = next((g for g in groups if g not in taken and (start is None or g.started >= start - 1.0)
                      and (end is None or g.started <= end + 1.0)), None)
        if first is not None:
            taken.append(first)
        names = {name for _, name in group}
        last = attempt == len(assigned) - 1
        if last and not summary.phase.finished:
            why = "running"
        elif last and summary.phase.value == "Complete":
            why = "completed"
        else:
            why = _why(names, listed, events, start, end, nodes)
            if last:
                why = f"{summary.reason or 'failed'}: {why}"
        rows.append(AttemptRow(attempt, start, first.first_step if first else None,
                               first.first_step_at if first else None, end, why, tuple(sorted(names))))
    notes = []
    if any(not row.pods for row in rows):
        notes.append("an attempt with no pod known: its Events expired (the API server keeps them an hour)")
    if summary.phase.value == "Restarting" and summary.message:
        notes.append(f"restarting: {summary.message}")  # the JobSet's condition, as it says it
    counted = summary.restart_attempt if summary.restarts_counted is None else summary.restarts_counted
    return Ledger(summary.name, tuple(rows), summary.restart_attempt, summary.max_restarts, counted, tuple(notes))
