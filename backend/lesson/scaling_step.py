"""Step 7: a one-worker and a two-worker run, a snapshot of the volume after each, and a
side-by-side note of their final loss and wall time: the run puts the measured table, quoted, at
the top of the note (figures to cite, which do not count), and the learner writes what they read
from it under the table (that is what the check reads).

The verify reads the snapshots and the metrics.json files inside them back from the platform.
"""

from __future__ import annotations

import json
import re

from backend.cluster import ClusterError
from backend.lesson.context import Handler, StepContext, job_started, line, needs_cluster
from backend.lesson.jobs import VOLUME, apply_runtime_and_volume, fresh_name, lesson_trainjob
from backend.lesson.notes import check_note, covered_text
from training.atomic import write_atomic
from backend.models import Evidence, JobPhase, RunMetrics, Snapshot
from backend.words import count

WORKER_COUNTS = (1, 2)
STEPS = 40
TIMEOUT = 600.0
RECORD = "runs.json"


def side_by_side(runs: list[tuple[str, RunMetrics]]) -> str:
    """The measured table, quoted: the cockpit's figures to cite, which count for nothing in the
    note's check (notes.py); what scaling out bought is the learner's to write under it."""
    rows = [f"| {m.world_size} | {m.final_loss:.6f} | {m.wall_seconds:.2f} s | {m.steps} | {snap} |"
            for snap, m in runs]
    return "\n".join(f"> {text}".rstrip() for text in [
        "Step 7: one worker against two, measured from the volume snapshots",
        "",
        "| workers | final loss | wall time | steps | snapshot |",
        "|---|---|---|---|---|",
        *rows,
    ]) + "\n"


_PLACEHOLDER_LINE = re.compile(r"\s*<[^<>]*>\s*")
ASK = "What scaling out bought: <your reading of the numbers: final loss and wall time, 1 worker against 2>\n"


def note_with_table(previous: str, table: str) -> str:
    """The new measured table at the top of the note; what the learner wrote (every line that is
    neither quoted nor a bare <placeholder>) stays under it, or the question when there is none."""
    own = "\n".join(line for line in previous.splitlines()
                    if not line.lstrip().startswith(">") and not _PLACEHOLDER_LINE.fullmatch(line)).strip()
    return f"{table}\n{own}\n" if own else f"{table}\n{ASK}"


async def run_two_sizes(ctx: StepContext):
    cluster = ctx.require_cluster()
    for result in await apply_runtime_and_volume(cluster):
        yield line(result)
    runs: list[dict] = []
    for workers in WORKER_COUNTS:
        name = fresh_name(f"lesson-scale-{workers}w")
        yield line(await cluster.apply(lesson_trainjob(name, workers, STEPS, step_delay=0.0)))
        yield job_started(name)
        summary = await cluster.wait_job(name, frozenset({JobPhase.COMPLETE, JobPhase.FAILED}), TIMEOUT)
        if summary.phase is not JobPhase.COMPLETE:
            raise ClusterError(f"TrainJob {name} ended {summary.phase.value}: {summary.message or summary.reason}")
        snapshot = await cluster.snapshot(VOLUME, name)
        yield line(f"{workers} worker(s): TrainJob {name} Complete; snapshot {snapshot.name} of "
                   f"volume {VOLUME} ({count(snapshot.files, 'file')})")
        runs.append({"job": name, "workers": workers, "snapshot": snapshot.name})
        write_atomic(ctx.run_dir / RECORD, json.dumps(runs, indent=2) + "\n")
    measured = []
    for run in runs:
        found = RunMetrics.of_run(await cluster.read_metrics(snapshot=run["snapshot"]), run["job"])
        if found is not None:
            measured.append((run["snapshot"], found))
    table = side_by_side(measured)
    for row in table.splitlines()[2:6]:
        yield line(row.removeprefix("> "))
    previous = ctx.note("7")
    ctx.save_note("7", note_with_table(previous, table))
    if previous.strip() and not _placeholder_only(previous):
        yield line("the measured table is at the top of your step-7 note; what you wrote is kept under it")
    else:
        yield line("the measured table is in your step-7 note: write under it what scaling out bought")


def _placeholder_only(note: str) -> bool:
    return not covered_text(note).strip()


def runs_in_snapshots(snapshots: list[Snapshot]) -> list[dict]:
    """Runs a learner snapshotted by hand (kfcockpit snapshot create, or a VolumeSnapshot applied
    with kubectl): the newest two ready snapshots of which one holds a one-worker run and the
    other a two-worker run, in the shape of step 7's own record; [] when there are none."""
    newest = sorted((s for s in snapshots if s.ready), key=lambda s: s.created, reverse=True)

    def run_of(snap: Snapshot, workers: int, other: Snapshot) -> str | None:
        # The run a snapshot was taken after is the one the other snapshot lacks (the volume
        # keeps every run), so that one first.
        older = {m.run for m in other.metrics}
        runs = [m.run for m in snap.metrics if m.world_size == workers and m.launcher == "torchrun"]
        return next((r for r in runs if r not in older), runs[0] if runs else None)

    for two in newest:
        for one in newest:
            if one.name != two.name and run_of(two, 2, one) and run_of(one, 1, two):
                return [{"job": run_of(one, 1, two), "workers": 1, "snapshot": one.name},
                        {"job": run_of(two, 2, one), "workers": 2, "snapshot": two.name}]
    return []


async def verify_snapshots(ctx: StepContext) -> Evidence:
    cluster = ctx.require_cluster()
    found = await cluster.snapshots()
    snapshots = {s.name: s for s in found}
    try:
        runs = json.loads((ctx.run_dir / RECORD).read_text())
    except (OSError, ValueError):
        runs = runs_in_snapshots(found)
    if not runs:
        return ctx.evidence(False, "no runs yet: kfcockpit lesson run 7 makes both runs and snapshots (or "
                                   "snapshot the volume yourself after a one-worker and a two-worker run)")
    seen, details = [], []
    for workers in WORKER_COUNTS:
        run = next((r for r in runs if r["workers"] == workers), None)
        if run is None:
            return ctx.evidence(False, f"the {workers}-worker run has not happened yet")
        snap = snapshots.get(run["snapshot"])
        if snap is None:
            return ctx.evidence(False, f"snapshot {run['snapshot']} of the {workers}-worker run does "
                                       "not exist (deleted?); run step 7 again")
        if not snap.ready:
            return ctx.evidence(False, f"snapshot {snap.name} is not ready yet")
        metrics = RunMetrics.of_run(await cluster.read_metrics(snapshot=snap.name), run["job"])
        if metrics is None:
            return ctx.evidence(False, f"snapshot {snap.name} holds no metrics.json of run {run['job']}")
        if metrics.world_size != workers:
            return ctx.evidence(False, f"run {run['job']} in snapshot {snap.name} trained with "
                                       f"{count(metrics.world_size, 'worker')}, expected {workers}")
        seen.append(f"{snap.name} ({count(workers, 'worker')}: final loss "
                    f"{metrics.final_loss:.6f} in {metrics.wall_seconds:.2f} s)")
        details.append(f"snapshot {snap.name}: {count(snap.files, 'file')}, volume {snap.volume}")
    note = check_note("7", ctx.note("7"), "kfcockpit lesson note 7 --note FILE")
    if not note.ok:
        return ctx.evidence(False, f"both snapshots exist, but the side-by-side note: {note.seen}",
                            details + [f"seen: {s}" for s in seen])
    return ctx.evidence(True, "2 snapshots: " + "; ".join(seen) + "; your note compares them", details)


HANDLERS = {"7": Handler(verify=verify_snapshots, run=run_two_sizes, unavailable=needs_cluster)}
