"""A hung group found in seconds: ranks that stop stepping while their pods still run.

The costliest failures of distributed training are not crashes. A rank that stops inside a step
(a hung collective, a stuck data loader, a frozen node) leaves every pod Running, and the group
waits out the collective timeout (gloo's and NCCL's watchdog: 30 minutes by default) before the
platform sees a failure; kubectl, k9s and the Kubeflow SDK show a healthy job meanwhile.

This reads what the goodput reads, the workers' lines and the pods' phases, on any cluster: once
the group's newest step line is older than `HangRule.limit` (a multiple of the recent step time,
never below a floor that covers checkpoint saves), and every pod of the newest attempt runs, the
group hangs. Silence while a pod waits (for a node), ends or goes (a group torn down, restarting)
has a reason the platform shows, and is no hang. Ranks are the ranks' own (`rank=` of their
lines, `Pod.ranks` of their pods), several to a pod where a pod runs one per GPU.

Which rank stopped: one that is behind the others' step, else one that went silent while the
others print `event=waiting` (the training loop's heartbeat while a step overruns: a frozen
process prints nothing, a rank blocked in a collective on it says so), else every rank.

A rank whose pod runs but whose lines were never heard (it printed nothing, or, in the cockpit
following 512 ranks, its log is not read) is not judged by silence: when every rank heard waits,
the one that stopped is among those, and the hang says so (`unheard`) rather than blaming the
ranks that wait; their last lines, once read and fed, tell which (`lines` takes them in any order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Iterable, Protocol

from backend.raytrain.groups import WorkerGroups, process_of
from training.logfmt import parse_line

DEFAULT_MULTIPLE = 10.0
DEFAULT_FLOOR = 10.0


class Line(Protocol):
    """What the watch reads of a line: a `backend.models.LogLine` has it."""

    pod: str
    rank: int
    time: float
    text: str
    step: int | None


@dataclass(frozen=True)
class HangRule:
    """When silence is a hang: longer than `multiple` recent steps, and than `floor` seconds."""

    multiple: float = DEFAULT_MULTIPLE
    floor: float = DEFAULT_FLOOR

    def limit(self, usual_step: float) -> float:
        return max(self.floor, self.multiple * usual_step)

    def describe(self) -> str:
        return f"silence over {self.multiple:g}x the recent step time, {self.floor:g}s at least"


@dataclass(frozen=True)
class Hang:
    step: int  # the group's newest step
    silent: float  # seconds since that step's line
    usual: float  # the recent step time
    limit: float  # the silence that counts as a hang
    stopped: tuple[int, ...]  # ranks that stopped: behind, or silent while others wait
    waiting: tuple[int, ...]  # ranks alive, waiting on the stopped ones
    running: tuple[int, ...]  # ranks whose pod still runs
    unheard: tuple[int, ...] = ()  # running ranks never heard from: the stopped one among them

    def one_line(self) -> str:
        if not self.stopped and self.unheard:
            who = f"one of {len(self.unheard)} ranks not heard from stopped"
        elif self.waiting or (len(self.stopped) == 1 and not self.unheard):
            who = "rank " + ", ".join(map(str, self.stopped)) + " stopped"
        elif self.unheard:
            who = f"every rank heard from stopped ({len(self.unheard)} not heard from)"
        else:
            who = "every rank stopped"
        pods = "its pod still runs" if len(self.stopped) == 1 and self.stopped[0] in self.running \
            else "their pods still run" if set(self.stopped + self.unheard) <= set(self.running) \
            else "pods not all running"
        waits = f"; rank {', '.join(map(str, self.waiting))} waiting on it" if self.waiting else ""
        return (f"hang: {who} after step {self.step}, silent {self.silent:.0f}s (usual step "
                f"{_seconds(self.usual)}, limit {self.limit:.0f}s); {pods}{waits}")

    def short(self) -> tuple[str, str]:
        """For a one-line bar: who stopped and where, then for how long against the usual step
        (the part a narrow bar can go without)."""
        if self.stopped:
            who = ("rank " if len(self.stopped) == 1 else "ranks ") + ",".join(map(str, self.stopped[:4]))
            who += "…" if len(self.stopped) > 4 else ""
        else:
            who = f"1 of {len(self.unheard)} unheard ranks"
        return f"HUNG {who} at step {self.step}", f": {self.silent:.0f}s silent (step {_seconds(self.usual)})"

    def as_dict(self) -> dict:
        return {"step": self.step, "silent_seconds": self.silent, "usual_step_seconds": self.usual,
                "limit_seconds": self.limit, "stopped_ranks": list(self.stopped),
                "waiting_ranks": list(self.waiting), "running_ranks": list(self.running),
                "unheard_ranks": list(self.unheard)}


@dataclass
class _Rank:
    step: int | None = None
    at: float | None = None  # its newest step line
    heard: float | None = None  # its newest line that is not a step line (a heartbeat, its start)
    done: bool = False


@dataclass
class HangWatch:
    """Fed lines and pods as they come; `check(now)` says whether the group hangs."""

    rule: HangRule = field(default_factory=HangRule)
    window: int = 20  # recent step intervals the usual step time is the median of
    _ranks: dict[int, _Rank] = field(default_factory=dict)
    _groups: WorkerGroups = field(default_factory=WorkerGroups)
    _steps: list[tuple[int, float]] = field(default_factory=list)  # (step, its first line) of this group
    _running: dict[int, bool] = field(default_factory=dict)  # rank -> its pod runs (the newest attempt)
    _attempt: int = -1
    _pods_now: set[str] = field(default_factory=set)  # the newest attempt's pods
    _pods_before: set[str] = field(default_factory=set)  # older attempts' pods: their late lines are theirs

    def lines(self, lines: Iterable[Line]) -> None:
        for line in lines:
            if line.rank < 0:
                continue  # a Ray driver: the workers are the group
            if line.pod in self._pods_before:
                continue  # the old group's last lines, read after the new group came: not its steps
            if line.step is not None:
                self._step(line.rank, line.step, line.time)
                continue
            if "event=" not in line.text:
                continue
            fields = parse_line(line.text)
            event = fields.get("event")
            if event == "start":
                if self._groups.started(line.rank, process_of(fields)):
                    self._ranks, self._steps = {}, []
                self._heard(line.rank, line.time)
            elif event == "waiting":
                self._heard(line.rank, line.time)
            elif event == "done":
                self._rank(line.rank).done = True

    def pod(self, pod) -> None:
        """A pod as listed or watched (`backend.models.Pod`): each of its ranks runs while it
        does; only the newest attempt's count. A new attempt is a new group: the old one's
        silence is no hang of it (it is being torn down, or its pods wait for a node)."""
        if pod.rank < 0:
            return
        if pod.restart_attempt < self._attempt:
            if pod.name not in self._pods_now:
                self._pods_before.add(pod.name)
            return
        if pod.restart_attempt > self._attempt:
            self._attempt, self._running = pod.restart_attempt, {}
            self._ranks, self._steps = {}, []
            self._pods_before |= self._pods_now
            self._pods_now = set()
        self._pods_now.add(pod.name)
        self._pods_before.discard(pod.name)
        for rank in pod.ranks:
            self._running[rank] = pod.phase == "Running"

    def usual_step(self) -> float | None:
        recent = self._steps[-self.window - 1:]
        intervals = [(b[1] - a[1]) / max(1, b[0] - a[0]) for a, b in zip(recent, recent[1:])]
        return median(intervals) if intervals else None

    def check(self, now: float) -> Hang | None:
        if not self._steps or not self._running or not all(self._running.values()):
            return None  # not stepping yet, or a pod waits, ended or goes: silence with a reason
        if self._ranks and all(r.done for r in self._ranks.values()):
            return None
        step, at = self._steps[-1]
        usual = self.usual_step() or 0.0
        limit = self.rule.limit(usual)
        if now - at <= limit:
            return None
        behind = tuple(sorted(r for r, s in self._ranks.items() if s.step is not None and s.step < step))
        waiting = tuple(sorted(r for r, s in self._ranks.items() if s.heard is not None and s.heard > at
                               and s.step == step))
        running = tuple(sorted(r for r, up in self._running.items() if up))
        unheard = tuple(r for r in running if r not in self._ranks)
        if behind:
            stopped = behind
        elif waiting:
            stopped = tuple(sorted(r for r in self._ranks if r not in waiting))
        else:
            stopped = tuple(sorted(self._ranks))
        if not stopped and len(unheard) == 1:  # every rank heard waits on the one never heard
            stopped, unheard = unheard, ()
        elif not stopped and not unheard:  # everyone says it waits: the stuck part is outside the ranks
            stopped, waiting = waiting, ()
        return Hang(step=step, silent=now - at, usual=usual, limit=limit, stopped=stopped,
                    waiting=tuple(r for r in waiting if r not in stopped), running=running,
                    unheard=unheard if not behind else ())

    def _rank(self, rank: int) -> _Rank:
        return self._ranks.setdefault(rank, _Rank())

    def _heard(self, rank: int, at: float) -> None:
        state = self._rank(rank)
        state.heard = at if state.heard is None else max(state.heard, at)

    def _step(self, rank: int, step: int, at: float) -> None:
        state = self._rank(rank)
        if state.step is None or step > state.step:
            state.step, state.at = step, at
        if not self._steps or step > self._steps[-1][0]:
            self._steps.append((step, at))
            del self._steps[:-(self.window + 1)]


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.1f}s"
