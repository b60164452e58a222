"""The failure timeline's model: what happened between a worker's failure and the first step its
group trained again, for each restart of the followed job, each fact with its time.

Fed with the same observations the screen already receives (pod watch events and the merged log
batches), never by asking the cluster again, and kept free of widgets so it is tested as plain
data. Facts are kept per pod as they arrive; which restart they belong to is worked out when
the timeline is read, so a log line that arrives before its pod's first watch event (the two
streams are not ordered with each other) still lands in the right place.

What the cluster did about the nodes the group ran on and the Events about its pods and its
JobSet (`node_timeline.py`, fed by the node and Event watches) join each restart in their order;
when one of those nodes stopped being Ready, the restart is that node's failure, timed from the
first sign of it (a peer's failure, or the node's Ready condition).

It also keeps the job's goodput (`backend.goodput`), fed from the same observations: every line,
each failed pod's end as a failure (a deleted one too, as the timeline counts it), and the job's
creation and end when the screen sees the job itself; and whether its newest group hangs
(`backend.hangs`: ranks that stopped stepping while their pods run), from the same lines and pods;
and which rank is a straggler (`backend.stragglers`: its own compute slower than the group's).

A job opened after it restarted has lost the pods and logs of its earlier groups: what the
platform and the run's record keep (`history_read`, `backend.goodput.job.job_history`, what
`kfcockpit goodput` measures) gives its goodput and those restarts, and the lines then read live
that the record holds already are not counted twice. While its newest group is silent for a
reason the platform shows (its pods wait for a node, it is torn down or restarting), `silence`
names it, for the job bar: the hang detector judges only a group whose pods all run.

The workers' own lines say what the platform cannot see: `event=start` (the process group formed:
rendezvous done), `event=checkpoint_saved reason=sigterm|peer_failure` (a survivor saved on the
way down), `event=resumed from_step=N` (the checkpoint loaded) and the first `step=` line after it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from backend.goodput import Goodput
from backend.hangs import HangWatch
from backend.stragglers import StragglerWatch
from tui.model.format import node_name, rank_label, ranks_label as fmt_ranks, short_name
from tui.model.node_timeline import NodeHistory, when
from backend.words import count

if TYPE_CHECKING:
    from backend.goodput import GoodputReport, RestartTimes
    from backend.goodput.job import JobHistory
    from backend.hangs import Hang
    from backend.stragglers import Straggler
    from backend.models import ClusterEvent, JobSummary, LogLine, NodeSummary, Pod, PodEvent

FINISHED = ("Succeeded", "Failed")
# Saves that happen because the group is going down (a periodic save is not part of a failure).
FAILURE_SAVES = ("sigterm", "peer_failure")


@dataclass
class PodFacts:
    """What one pod did, as seen: from its watch events and its own lines."""

    name: str
    rank: int = 0  # its node rank (the pod's index)
    ranks: tuple[int, ...] = ()  # the global ranks it runs (one per process; () before its pod is seen)
    attempt: int = 0
    node: str = ""  # the node it was bound to
    created: float | None = None
    started: float | None = None
    ended: float | None = None  # finished, or seen deleted
    phase: str = "Pending"
    reason: str = ""
    message: str = ""  # why, where the reason needs it (what the scheduler found short)
    exit_code: int | None = None
    deleted: bool = False
    start_line: float | None = None  # event=start: the process group formed
    resumed: tuple[float, int] | None = None  # (time, from_step)
    first_step: tuple[float, int] | None = None  # the first step line
    last_step: tuple[float, int] | None = None  # the newest step line
    saves: list[tuple[float, int, str, str, int]] = field(default_factory=list)  # (time, step, reason, seconds, rank)
    last_line: str = ""  # the newest line it printed (a failed rank's last words)

    @property
    def failed(self) -> bool:
        return self.phase == "Failed" or (self.deleted and self.phase != "Succeeded")

    @property
    def ranks_label(self) -> str:
        """`rank 1`, `ranks 2-3`: who it ran, as its pod says, else as its lines did."""
        return fmt_ranks(self.ranks or (self.rank,))

    @property
    def why(self) -> str:
        """Why it ended, as the kubelet tells it: the reason (OOMKilled, Error, deleted) and the
        exit code, with the signal an exit code over 128 stands for (137: SIGKILL)."""
        parts = [self.reason or ("deleted" if self.deleted else self.phase)]
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}" + _signal(self.exit_code))
        return ", ".join(parts)


@dataclass(frozen=True)
class Moment:
    at: float  # epoch seconds
    what: str
    kind: str = "info"  # failure | down | up | resume | step | save | info


@dataclass(frozen=True)
class Restart:
    """One failure of attempt `attempt` and the recovery into `attempt + 1`."""

    attempt: int  # the attempt that failed
    failed_at: float
    moments: tuple[Moment, ...]
    steps_lost: int | None  # None until the new group has resumed
    recovery_seconds: float | None  # failure seen → first resumed step; None while recovering
    node: str | None = None  # the node whose failure this was

    @property
    def recovered(self) -> bool:
        return self.recovery_seconds is not None


# What each point of a restart the run's record told is called in the timeline.
RECORDED_POINTS = {"failure_seen": ("failure seen (from the run's record: its pods are gone)", "failure"),
                   "survivors_saved": ("the survivors saved their step", "save"),
                   "pods_created": ("new pods created", "up"), "pods_started": ("new processes started", "up"),
                   "group_formed": ("rendezvous complete (event=start)", "up"),
                   "checkpoint_loaded": ("checkpoint loaded", "resume"),
                   "first_step": ("first step trained again", "step")}


def _recorded(times: "RestartTimes") -> Restart:
    """A restart from the run's record alone (its pods and their events are gone): the points
    its lines tell, timed as `kfcockpit goodput` times them."""
    from backend.goodput.report import RESTART_POINTS

    points = [(name, getattr(times, name)) for name in RESTART_POINTS if getattr(times, name) is not None]
    moments = tuple(Moment(at, *RECORDED_POINTS[name]) for name, at in points)
    began = points[0][1] if points else 0.0
    recovery = times.seconds
    if recovery is None and times.first_step is not None:
        recovery = max(0.0, times.first_step - began)
    return Restart(times.attempt - 1, began, moments, None, recovery)


def _cause(restart: Restart) -> str:
    """` after kfcockpit-worker2 was lost`, ` after rank 1 failed`: what a restart came after."""
    if restart.node is not None:
        return f" after {restart.node} was lost"
    failure = next((m for m in restart.moments if m.kind == "failure"), None)
    if failure is None or not failure.what.startswith("failure seen: "):
        return ""
    return " after " + failure.what.removeprefix("failure seen: ").split(")")[0] + ") failed"


def _signal(code: int) -> str:
    """` (SIGKILL)` for 137: a shell's and the kubelet's way of saying a signal ended it."""
    import signal

    if code <= 128:
        return ""
    try:
        return f" ({signal.Signals(code - 128).name})"
    except ValueError:
        return ""


def _telling(text: str) -> bool:
    """A line that says something: not blank, not a rule of `=`/`-` (torchrun's failure report
    is framed in them), not a label alone (torchrun's `Failures:`, `[0]:`)."""
    words = text.strip()
    return sum(c.isalpha() for c in words) >= 3 and not words.endswith(":") and not set(words) <= set("=-*#_ ")


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _seconds(value: str) -> float:
    try:
        return float(value) if value else 0.0
    except ValueError:
        return 0.0


class FailureTimeline:
    def __init__(self, job: str | None = None) -> None:
        self.job = job  # only to shorten pod names
        self.pods: dict[str, PodFacts] = {}
        self.version = 0  # bumped on every change that can alter what is shown
        self.goodput = Goodput()
        self.hangs = HangWatch()
        self.slow = StragglerWatch()
        self._summary: "JobSummary | None" = None
        self.total_steps: int | None = None  # the run's --steps, from a group's start line
        self.nodes = NodeHistory()  # the cluster's: kept when another job is followed
        self._history_state()

    def reset(self, job: str | None = None) -> None:
        self.job = job
        self.pods.clear()
        self.version += 1
        self.goodput = Goodput()
        self.hangs = HangWatch()
        self.slow = StragglerWatch()
        self._summary = None
        self.total_steps = None
        self._history_state()

    def _history_state(self) -> None:
        self.history: "JobHistory | None" = None  # what the platform and the volume kept
        self._recorded: Counter[tuple[int, str]] = Counter()  # its lines not yet read again live
        self._held: list["LogLine"] | None = None  # lines for the goodput while the history loads
        self._recorded_restarts: tuple["RestartTimes", ...] = ()

    def history_expected(self) -> None:
        """The job's history is being read: the goodput waits for it (lines are held, then
        counted once: those the record has are in it already)."""
        self._held = []

    def history_read(self, history: "JobHistory | None") -> None:
        """The job as the platform and its volume keep it (`backend.goodput.job.job_history`,
        what `kfcockpit goodput` measures): its goodput from every group it had, however late
        it is opened, and the restarts whose pods are gone; then the held lines. None: there
        was none to read (the lines held are counted as they are)."""
        held, self._held = self._held or [], None
        if history is not None:
            self.history = history
            self._recorded_restarts = history.goodput().report().restart_times
            self._recount()
        self._feed_goodput(held)
        self.version += 1

    def _recount(self) -> None:
        """The goodput from the history again (or from nothing), with the failures seen."""
        history = self.history
        self.goodput = history.goodput() if history is not None else Goodput()
        self._recorded = history.recorded() if history is not None else Counter()
        if self._summary is not None:
            self.job_seen(self._summary)
        for facts in self.pods.values():
            if facts.failed and facts.ended is not None:
                self.goodput.failure(facts.ended)

    def lines_resent(self) -> None:
        """The log stream reopened and sends the job's lines again from its start: the goodput
        is counted again from them (the failures seen stay)."""
        self.hangs = HangWatch()
        self.slow = StragglerWatch()
        self._recount()

    def _facts(self, name: str) -> PodFacts:
        facts = self.pods.get(name)
        if facts is None:
            facts = self.pods[name] = PodFacts(name)
        return facts

    # ------------------------------------------------------------------ feeding

    def job_seen(self, summary: "JobSummary") -> None:
        """The job as listed or watched: its creation starts the goodput's wall time, its end
        ends it."""
        self._summary = summary
        if self.goodput.started is None or summary.created < self.goodput.started:
            self.goodput.started = summary.created
        if summary.finished is not None:
            self.goodput.finish(summary.finished)

    def node_seen(self, node: "NodeSummary", seen_at: float) -> None:
        if self.nodes.node_seen(node, seen_at):
            self.version += 1

    def cordons(self) -> list[Moment]:
        """Every node cordoned or uncordoned while the cockpit watched, whichever job: a cordon
        restarts nothing, so no restart would tell it (a person pressed C and saw nothing)."""
        return [Moment(m.at, m.what, m.kind) for m in self.nodes.moments if m.kind == "cordon"]

    def event_seen(self, event: "ClusterEvent", seen_at: float) -> None:
        if self.nodes.event_seen(event, seen_at):
            self.version += 1

    def pod_event(self, event: "PodEvent", seen_at: float) -> None:
        pod: "Pod" = event.pod
        deleted = event.type.value == "DELETED"
        self.hangs.pod(pod.model_copy(update={"phase": "Failed"}) if deleted and not pod.phase.finished else pod)
        self.slow.pod(pod)
        facts = self._facts(pod.name)
        was_failed = facts.failed and facts.ended is not None
        before = (facts.attempt, facts.started, facts.phase, facts.ended, facts.deleted, facts.reason)
        facts.rank, facts.attempt, facts.node = pod.rank, pod.restart_attempt, pod.node or facts.node
        facts.ranks = tuple(pod.ranks)
        facts.created = facts.created if facts.created is not None else when(pod.created, seen_at)
        facts.started = facts.started or (when(pod.started, seen_at) if pod.started else None)
        if not deleted or pod.phase.value in FINISHED:
            facts.phase = pod.phase.value
        facts.reason = pod.reason or facts.reason
        facts.message = pod.message if not pod.phase.finished else ""
        facts.exit_code = pod.exit_code if pod.exit_code is not None else facts.exit_code
        if (pod.phase.value in FINISHED or deleted) and facts.ended is None:
            facts.ended = when(pod.finished, seen_at)
        facts.deleted = facts.deleted or deleted
        if facts.failed and facts.ended is not None and not was_failed:
            self.goodput.failure(facts.ended)  # once per pod, at the finer of its two times
        if (facts.attempt, facts.started, facts.phase, facts.ended, facts.deleted, facts.reason) != before:
            self.version += 1  # a step or loss update changes nothing here: no redraw

    def add_lines(self, batch: Sequence["LogLine"]) -> None:
        """A batch of the merged log, in order. Of a pod's step lines in a batch only its first
        and last can change its facts."""
        from training.logfmt import parse_line

        self.hangs.lines(batch)
        self.slow.lines(batch)
        if self._held is not None:
            self._held.extend(batch)
        else:
            self._feed_goodput(batch)
        first: dict[str, "LogLine"] = {}  # pod → its first and last step line in this batch
        last: dict[str, "LogLine"] = {}
        newest: dict[str, str] = {}  # pod → its last line in this batch (its last telling one below)
        for line in batch:
            text = line.text
            newest[line.pod] = text
            if line.step is not None:
                if line.pod not in last:
                    first[line.pod] = line
                    self._facts(line.pod)  # pods in the order they are first seen, as before
                last[line.pod] = line
                continue
            if "event=" not in text:
                continue
            fields = parse_line(text)
            event = fields.get("event")
            facts = self._facts(line.pod)
            if event == "start":
                self.total_steps = _int(fields.get("steps")) or self.total_steps
            if event == "start" and facts.start_line is None:
                facts.start_line = line.time
            elif event == "resumed" and facts.resumed is None:
                facts.resumed = (line.time, _int(fields.get("from_step")) or 0)
            elif event == "checkpoint_saved" and fields.get("reason") in FAILURE_SAVES:
                facts.saves.append((line.time, _int(fields.get("step")) or 0, fields["reason"],
                                    fields.get("seconds", ""), line.rank))
            else:
                continue
            self.version += 1
        for line in reversed(batch):  # a failed rank's last words: its newest line that says something
            if line.pod in newest and _telling(line.text):
                self._facts(line.pod).last_line = line.text
                del newest[line.pod]
        for pod, line in last.items():
            facts = self.pods[pod]
            if facts.created is None:  # no pod event yet: its lines say who it runs
                facts.rank = line.rank
            if facts.first_step is None:
                facts.first_step = (first[pod].time, first[pod].step)
                self.version += 1
            facts.last_step = (line.time, line.step)

    def _feed_goodput(self, batch: Sequence["LogLine"]) -> None:
        """Lines to the goodput, those the history counted already aside. Plain step lines,
        nearly all of them, go in runs: the goodput takes each run together."""
        goodput, recorded = self.goodput, self._recorded
        steps: list["LogLine"] = []  # plain step lines not yet handed to the goodput
        for line in batch:
            if recorded:
                key = (line.rank, line.text)
                if recorded[key] > 0:
                    recorded[key] -= 1
                    continue
            text = line.text
            if line.step is not None and "event=" not in text and "ckpt_wait=" not in text:
                steps.append(line)
                continue
            if steps:  # the goodput takes lines in order: the steps before this line first
                goodput.feed_steps(steps)
                steps = []
            goodput.feed(line.time, text)
        goodput.feed_steps(steps)

    # ------------------------------------------------------------------ reading

    def goodput_report(self, now: float) -> "GoodputReport | None":
        """The followed job's goodput up to `now` (its end, once it has ended); None when no job
        is followed."""
        return None if self.job is None else self.goodput.report(now)

    def heard(self, lines: Sequence["LogLine"]) -> None:
        """Lines read outside the merged log (the last lines of ranks whose logs are not
        followed): for the hang detector alone; the goodput and the restarts are the log's."""
        self.hangs.lines(lines)

    def hang(self, now: float) -> "Hang | None":
        """Whether the newest group hangs now (None: it steps, or no pod of it runs)."""
        return None if self.job is None else self.hangs.check(now)

    def stragglers(self) -> "tuple[Straggler, ...]":
        """The newest group's stragglers in the newest window judged, slowest first; none once
        the job has ended (nothing waits for them any more)."""
        if self.job is None or (self._summary is not None and self._summary.phase.finished):
            return ()
        return self.slow.stragglers

    def silence(self) -> str | None:
        """Why the followed job's newest group prints no step, when the platform says why: its
        pods wait for a node, its group is torn down or restarting (after a lost node, a failed
        rank), its group is starting. None while every pod of it runs and has stepped (a silence
        then is the hang detector's to judge), or once the job has ended."""
        seen = [p for p in self.pods.values() if p.created is not None]  # by the pod watch, not lines alone
        if self.job is None or (self._summary is not None and self._summary.phase.finished) or not seen:
            return None
        newest = max(p.attempt for p in seen)
        group = [p for p in seen if p.attempt == newest]  # deleted ones too: the group torn down
        if all(p.phase == "Succeeded" for p in group):
            return None
        restarts = self.restarts()
        failed = [p for p in group if p.failed]
        if failed:  # this group goes: what took it down, as far as it is known yet
            this = next((r for r in restarts if r.attempt == newest), None)
            if this is not None and this.node is not None:
                return f"restarting after {this.node} was lost: the group is torn down"
            first = min(failed, key=lambda p: p.ended or 0.0)
            return f"restarting: pod {short_name(first.name, self.job)} ({first.ranks_label}) {first.why}, " \
                   "the group is torn down"
        before = next((r for r in restarts if r.attempt == newest - 1), None)
        after = _cause(before) if before is not None else ""
        unschedulable = next((p for p in group if p.phase == "Pending" and p.reason == "Unschedulable"), None)
        if unschedulable is not None:
            return f"waiting for a node{after}: {unschedulable.message or 'no node fits its pod'}"
        running = sum(1 for p in group if p.phase == "Running")
        if running < len(group):
            return f"{'restarting' if newest > 0 else 'starting'}{after}: {running} of {len(group)} pods running"
        if newest > 0 and not any(p.first_step for p in group):
            return f"restarting{after}: rendezvous and checkpoint load"
        return None

    def restarts(self) -> list[Restart]:
        by_attempt: dict[int, list[PodFacts]] = {}
        for facts in self.pods.values():
            by_attempt.setdefault(facts.attempt, []).append(facts)
        found = []
        for attempt in sorted(by_attempt):
            restart = self._restart(attempt, by_attempt[attempt], by_attempt.get(attempt + 1, []))
            if restart is not None:
                found.append(restart)
        # Restarts whose pods the platform no longer lists, as the run's record tells them.
        seen = {r.attempt for r in found}
        found += [_recorded(times) for times in self._recorded_restarts if times.attempt - 1 not in seen]
        return sorted(found, key=lambda r: r.attempt)

    def _restart(self, attempt: int, old: list[PodFacts], new: list[PodFacts]) -> Restart | None:
        failed = [p for p in old if p.failed and p.ended is not None]
        nodes = {p.node for p in old if p.node}
        born = min((p.created for p in old if p.created is not None), default=0.0)
        # What the cluster did counts for this restart from the group's start until the new group
        # fails (a failure before this one's is an earlier run's, whose lines the volume kept).
        began = min((p.ended for p in failed), default=born)
        until = min((p.ended for p in new if p.failed and p.ended is not None and p.ended > began),
                    default=float("inf"))
        lost = self.nodes.lost(nodes, born, until)
        if not failed and not new and lost is None:
            return None
        if failed:
            # Why the group failed is the first pod that ended on its own: a survivor that saved
            # and was then SIGKILLed by the teardown ended because of the failure, not for it.
            first = min([p for p in failed if not p.saves] or failed, key=lambda p: p.ended)
            # A survivor saves because the failure happened: it was there by the time the save
            # began (as backend.goodput counts it), even when the pod's end is seen later (a
            # whole-second stamp is timed by when its event arrived, and events lag lines).
            t0 = min([first.ended] + [at - _seconds(took) for p in old for at, _, _, took, _ in p.saves])
            moments = [Moment(t0, f"failure seen: pod {short_name(first.name, self.job)} "
                                  f"({first.ranks_label}) {first.why}", "failure")]
            if first.last_line:
                moments.append(Moment(t0, f"{first.ranks_label}'s last line: {first.last_line[:160]}"))
        elif lost is not None:  # the node went before any pod of the group was seen to end
            t0, moments = lost.at, []
        else:  # the new group is here but the failure itself was never seen (joined late)
            t0 = min((p.created for p in new if p.created is not None), default=0.0)
            moments = [Moment(t0, "failure not seen (the cockpit joined later)", "failure")]
        if lost is not None:
            t0 = min(t0, lost.at)
            on_it = sorted({r for p in old if p.node == lost.node for r in (p.ranks or (p.rank,))})
            ranks = f" (rank {', '.join(map(rank_label, on_it))} ran there)" if on_it else ""
            moments.insert(0, Moment(t0, f"node {lost.node} failed{ranks}", "failure"))
            told = self.nodes.told(nodes, [p.name for p in (*old, *new)], self.job, t0, until)
            moments += [Moment(at, what, kind) for at, what, kind in told]
        newest = max((p.last_step[1] for p in old if p.last_step is not None), default=None)
        for p in old:
            for at, step, reason, seconds, rank in p.saves:
                took = f", {float(seconds):.2f} s" if seconds else ""
                moments.append(Moment(at, f"rank {rank} saved step {step} ({reason}{took})", "save"))
        # The new group's own lines are timed to the microsecond when printed; pod times are the
        # second their event was seen, which under load is after those lines. Nothing of the
        # platform's comes after the first line of the group it made: such a time is that line's.
        lines_at = [at for p in new
                    for at in (p.start_line, p.resumed and p.resumed[0], p.first_step and p.first_step[0]) if at]
        cap = min(lines_at, default=float("inf"))
        if old and all(p.ended is not None for p in old):
            moments.append(Moment(min(cap, max(p.ended for p in old)), f"group torn down ({count(len(old), 'pod')})",
                                  "down"))
        if new:
            created = [p.created for p in new if p.created is not None]
            if created:
                moments.append(Moment(min(cap, min(created)), f"new pods created (attempt {attempt + 1})", "up"))
            started = [p.started for p in new if p.started is not None]
            if started and len(started) == len(new):
                placed = sorted({node_name(p.node) for p in new if p.node})
                on = f" on {', '.join(placed)}" if placed else ""
                moments.append(Moment(min(cap, max(started)), f"{len(new)} new pods running{on}", "up"))
            formed = [p.start_line for p in new if p.start_line is not None]
            if formed:
                moments.append(Moment(min(formed), "rendezvous complete (event=start)", "up"))
        resumed = [p.resumed for p in new if p.resumed is not None]
        from_step = None
        if resumed:
            at, from_step = min(resumed)
            moments.append(Moment(at, f"checkpoint loaded: resumed from step {from_step}", "resume"))
        stepped = [p.first_step for p in new if p.first_step is not None]
        recovery = steps_lost = None
        if stepped:
            at, step = min(stepped)
            moments.append(Moment(at, f"first step trained again: step {step}", "step"))
            # failure seen to first step again: the goodput's restart seconds (RestartTimes.seconds)
            recovery = max(0.0, at - t0) if failed else None
            start = from_step if from_step is not None else step - 1
            if newest is not None:
                steps_lost = max(0, newest - start)
        moments.sort(key=lambda m: m.at)  # stable: moments at one time stay in the order of events
        return Restart(attempt, t0, tuple(moments), steps_lost, recovery, lost.node if lost is not None else None)
