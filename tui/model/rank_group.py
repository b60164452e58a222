"""A group of ranks at a glance, for a job larger than the pods panel shows usefully: how many of
the newest attempt's pods are in each phase (and how many ranks they run: one per GPU), which
ranks are behind the others' step, stopped (the hang detector's verdict, backend/hangs.py),
slow (the straggler detector's, backend/stragglers.py, among the ranks read), failed or waiting,
and which ranks deserve a row of their own, and so have their logs read (the log focus).

What is known, and from where, is said with it: every pod's phase comes from the one pod watch; a
rank's step only from its own lines, which are read for the ranks shown (and rank 0, whose lines
speak for the group), so "behind" is judged among those. Pure functions over what the pods table
holds, tested as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median_high
from typing import TYPE_CHECKING, Iterable, Mapping

from backend.models import MAX_FOLLOWED
from tui.model.format import pod_reason, ranks_label
from backend.words import count

if TYPE_CHECKING:
    from backend.hangs import Hang
    from backend.models import Pod
    from backend.stragglers import Straggler

BEHIND_STEPS = 2  # a rank this many steps under the median is behind (lines arrive in batches)
SHOWN_AT_MOST = 6  # ranks named in one line of the summary; the rest are counted
PHASES = ("Running", "Pending", "Succeeded", "Failed", "Unknown")


@dataclass(frozen=True)
class RankGroup:
    attempt: int  # the newest restart attempt
    size: int  # its ranks (a pod runs one per GPU: Pod.ranks)
    phases: tuple[tuple[str, int], ...]  # (phase, pods), in PHASES order, those with any
    read: int  # ranks whose lines are read (their step known)
    median: int | None  # the median of the known steps (of two middle ones, the higher)
    # Pods by their index (node rank: the log focus's), each named in the rows by its ranks.
    behind: tuple[tuple[int, int], ...]  # (pod, steps under the median), the furthest first
    stopped: tuple[int, ...]  # the pods of the ranks the hang detector says stopped
    failed: tuple[tuple[int, str], ...]  # (pod, how) of the newest attempt's failed pods
    waiting: tuple[tuple[int, str], ...]  # (pod, why) of pods held back (Unschedulable, back-off)
    ending: int  # pods of older attempts still there: a restart under way
    hang: "Hang | None"
    pods: int = 0  # its pods (0: as many as ranks)
    names: tuple[tuple[int, str], ...] = ()  # (pod, "rank 5" or "ranks 4-7"): what a row calls it
    stragglers: tuple["Straggler", ...] = ()  # the slowest first
    slow: tuple[int, ...] = ()  # the pods (by index) that run them

    def named(self, pod: int) -> str:
        return dict(self.names).get(pod, f"rank {pod}")

    def rows(self) -> list[tuple[str, str]]:
        """(text, style) lines, most telling first: the panel shows as many as fit."""
        counts = " · ".join(f"{n} {phase}" for phase, n in self.phases)
        ranks = count(self.size, "rank") + (f" in {count(self.pods, 'pod')}" if self.pods not in (0, self.size) else "")
        lines = [(f"attempt {self.attempt} · {ranks}: {counts}", "bold")]
        if self.ending:
            pods = count(self.ending, 'pod')
            lines.append((f"restarting: {pods} of the last attempt still ending", "bold $warning"))
        if self.hang is not None:
            lines.append((self.hang.one_line(), "bold $error"))
        if self.failed:
            lines.append(("failed: " + _named(f"{self.named(r)} {how}" for r, how in self.failed), "bold $error"))
        if self.stopped and self.hang is None:
            lines.append(("stopped: " + _named(self.named(r) for r in self.stopped), "bold $error"))
        if self.stragglers:
            more = f" (and {count(len(self.stragglers) - 1, 'other')})" if len(self.stragglers) > 1 else ""
            lines.append((self.stragglers[0].one_line() + more, "bold $warning"))
        if self.behind:
            lines.append((f"behind step {self.median}: " + _named(f"{self.named(r)} -{n}" for r, n in self.behind),
                          "$warning"))
        if self.waiting:
            lines.append(("waiting: " + _named(f"{self.named(r)} {why}" for r, why in self.waiting), "$warning"))
        step = f"median step {self.median}" if self.median is not None else "no step yet"
        lines.append((f"{step}: steps from the logs of {self.read} of {self.size} ranks (the rows), "
                      "the others' state from the pod watch · g: go to a rank", "dim"))
        return lines


def _named(items: Iterable[str]) -> str:
    items = list(items)
    shown = ", ".join(items[:SHOWN_AT_MOST])
    return shown + (f" and {len(items) - SHOWN_AT_MOST} more" if len(items) > SHOWN_AT_MOST else "")


def summarize(pods: Mapping[str, "Pod"], steps: Mapping[str, int], attempt: int,
              hang: "Hang | None" = None, stragglers: tuple["Straggler", ...] = ()) -> RankGroup:
    """`pods` by name (every attempt's), `steps` the newest step read per pod, `attempt` the
    newest; a hang the detector found in the newest group, and its stragglers."""
    newest = [pod for pod in pods.values() if pod.restart_attempt == attempt and pod.rank >= 0]
    phases = {phase: 0 for phase in PHASES}
    for pod in newest:
        phases[pod.phase.value] = phases.get(pod.phase.value, 0) + 1
    known = {pod.rank: steps[pod.name] for pod in newest if pod.name in steps}
    middle = median_high(known.values()) if known else None
    behind = sorted(((rank, middle - step) for rank, step in known.items() if middle - step >= BEHIND_STEPS),
                    key=lambda item: (-item[1], item[0]))
    failed = sorted((pod.rank, pod_reason(pod) or "Failed") for pod in newest if pod.phase.value == "Failed")
    waiting = sorted((pod.rank, pod.reason) for pod in newest
                     if pod.phase.value in ("Pending", "Unknown") and pod.reason)
    ending = sum(1 for pod in pods.values() if pod.restart_attempt < attempt and not pod.phase.finished)
    return RankGroup(attempt=attempt, size=sum(len(pod.ranks) for pod in newest), pods=len(newest),
                     phases=tuple((p, n) for p, n in phases.items() if n),
                     read=len(known), median=middle, behind=tuple(behind),
                     stopped=_pods_of(newest, hang.stopped) if hang is not None else (), failed=tuple(failed),
                     waiting=tuple(waiting), ending=ending, hang=hang,
                     names=tuple((pod.rank, ranks_label(pod.ranks)) for pod in newest),
                     stragglers=stragglers, slow=_pods_of(newest, [s.rank for s in stragglers]))


def _pods_of(pods: list["Pod"], ranks: Iterable[int]) -> tuple[int, ...]:
    """The indexes of the pods that run these ranks (a pod runs one per GPU)."""
    wanted = set(ranks)
    return tuple(sorted({pod.rank for pod in pods if wanted.intersection(pod.ranks)}))


def ranks_to_show(group: RankGroup, pinned: Iterable[int] = (), most: int = MAX_FOLLOWED) -> list[int]:
    """The ranks given a row of their own, most telling first (the log focus takes them in this
    order): rank 0, those a person went to, then failed, stopped, slow, behind and waiting ones."""
    order = [0, *pinned, *(r for r, _ in group.failed), *group.stopped, *group.slow,
             *(r for r, _ in group.behind),
             *(r for r, _ in group.waiting)]
    return list(dict.fromkeys(order))[:most]
