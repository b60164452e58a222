"""Steps 1, 4, 5 and 8: the lesson's pipelines run from a step.

  1  the one-step print pipeline; its task log holds the inputs
  4  the train pipeline submits a two-worker TrainJob from a task; both pods start together, finish
  5  the same run's checkpoint volume, created by the pipeline, read by a separate reader
  8  the Ray Train component (ray declared to install) with two CPU workers reporting metrics

Verifies look the TrainJob, its pods, the volume and the metrics up on the platform; what they take
from the kept pipeline run is which job and volume it made and the task logs the platform gave.
"""

from __future__ import annotations

from backend.cluster import NotFound
from backend.lesson.context import Handler, StepContext, line, needs_cluster
from backend.lesson.evidence import clock, same_loss_every_step
from backend.lesson.jobs import apply_runtime_and_volume
from backend.lesson.pipeline_runs import find_task, load_run, run_pipeline
from backend.models import Evidence, JobPhase, PodPhase
from training.logfmt import parse_line
from backend.words import count

PRINT_MESSAGE = "hello from kfcockpit"
TRAIN_STEPS = 40
RAY_STEPS = 30


def _no_run(step: str) -> str:
    return f"no run yet: kfcockpit lesson run {step}"


# ---------------------------------------------------------------- step 1


async def run_print(ctx: StepContext):
    from backend.pipelines.runs import run_print_pipeline

    async for update in run_pipeline(ctx, lambda on_event: run_print_pipeline(
            ctx.settings, message=PRINT_MESSAGE, workers=2, on_event=on_event), timeout=300):
        yield update


async def verify_print(ctx: StepContext) -> Evidence:
    result = load_run(ctx)
    if result is None:
        return ctx.evidence(False, _no_run("1"))
    details = [f"pipeline run {result.run_id} ({result.backend}): {result.location or result.file}"]
    if not result.ok:
        return ctx.evidence(False, f"the run {result.run_id} ended {result.state.value}: {result.error}", details)
    task = find_task(result, "print-inputs")
    if task is None:
        return ctx.evidence(False, f"the run {result.run_id} has no print-inputs task", details)
    expected = [f"input {key}={value!r}" if isinstance(value, str) else f"input {key}={value}"
                for key, value in result.arguments.items()]
    missing = [text for text in expected if text not in task.logs]
    details += [f"log: {text}" for text in task.logs[:5]]
    if missing:
        return ctx.evidence(False, f"the task log lacks {', '.join(missing)}", details)
    return ctx.evidence(True, f"run {result.run_id} Succeeded and its task log holds the inputs: "
                              + ", ".join(e.removeprefix("input ") for e in expected), details)


# ---------------------------------------------------------------- steps 4 and 5: the train pipeline


async def run_train(ctx: StepContext):
    from backend.pipelines.runs import run_training_pipeline

    cluster = ctx.require_cluster()
    for result in await apply_runtime_and_volume(cluster):  # the runtime the TrainJob refers to
        yield line(result)
    async for update in run_pipeline(ctx, lambda on_event: run_training_pipeline(
            ctx.settings, workers=2, steps=TRAIN_STEPS, on_event=on_event), timeout=600):
        yield update


def _train_outputs(ctx: StepContext, step_id: str = "4"):
    """(run result, train task, volume task) of step 4's pipeline run, or an Evidence why not."""
    result = load_run(ctx, step_id=step_id)
    if result is None:
        return ctx.evidence(False, _no_run("4"))
    if not result.ok:
        return ctx.evidence(False, f"the pipeline run {result.run_id} ended {result.state.value}: "
                                   f"{result.error}")
    train, volume = find_task(result, "train-job"), find_task(result, "create")
    if train is None or "job" not in train.outputs or volume is None or "name" not in volume.outputs:
        return ctx.evidence(False, f"the pipeline run {result.run_id} reports no TrainJob or no volume")
    return result, train, volume


async def verify_trainjob(ctx: StepContext) -> Evidence:
    found = _train_outputs(ctx)
    if isinstance(found, Evidence):
        return found
    result, train, _ = found
    cluster = ctx.require_cluster()
    name = train.outputs["job"]
    try:
        job = await cluster.get_job(name)
    except NotFound:
        return ctx.evidence(False, f"TrainJob {name} (from task {train.name} of run {result.run_id}) "
                                   "is not on the platform any more; run step 4 again")
    details = [f"TrainJob {name}: created by task {train.name} of pipeline run {result.run_id}",
               f"phase {job.phase.value}, {count(job.num_nodes, 'worker')}, restart attempt {job.restart_attempt}"]
    if job.num_nodes != 2:
        return ctx.evidence(False, f"TrainJob {name} declares {count(job.num_nodes, 'worker')}, not 2", details)
    if job.phase is not JobPhase.COMPLETE:
        return ctx.evidence(False, f"TrainJob {name} is {job.phase.value}, not Complete", details)
    pods = sorted(await cluster.list_pods(name), key=lambda p: p.rank)
    details += [f"pod {p.name}: rank {p.rank} on node {p.node or '(none)'}, {p.phase.value}, "
                f"started {clock(p.started)}, finished {clock(p.finished)}" for p in pods]
    if sorted(p.rank for p in pods) != [0, 1]:
        return ctx.evidence(False, f"TrainJob {name} has pods of ranks {[p.rank for p in pods]}, not 0 and 1",
                            details)
    unfinished = [p for p in pods if p.phase is not PodPhase.SUCCEEDED]
    if unfinished:
        return ctx.evidence(False, f"pod {unfinished[0].name} is {unfinished[0].phase.value}, not Succeeded",
                            details)
    if any(p.started is None or p.finished is None for p in pods):
        return ctx.evidence(False, "the platform did not record when the pods started and finished", details)
    # Together: both were running at the same time (each started before the other finished).
    last_start, first_end = max(p.started for p in pods), min(p.finished for p in pods)
    if last_start >= first_end:
        return ctx.evidence(False, "the pods did not run together: one finished before the other "
                                   "started", details)
    return ctx.evidence(True, f"TrainJob {name} created from pipeline task {train.name}: its 2 pods "
                              f"started {abs(pods[0].started - pods[1].started):.2f} s apart, ran "
                              f"together ({_placement(pods)}) and both Succeeded", details)


def _placement(pods) -> str:
    """Where each rank ran: "rank 0 on node A, rank 1 on node B", or both on one node."""
    nodes = {p.node for p in pods}
    if len(nodes) == 1:
        return f"both on node {nodes.pop() or '(none)'}"
    return ", ".join(f"rank {p.rank} on node {p.node or '(none)'}" for p in pods)


async def show_volume(ctx: StepContext):
    """Step 5's action: the volume step 4's pipeline created, read from this process — a reader
    separate from the workers that wrote it."""
    found = _train_outputs(ctx)
    if isinstance(found, Evidence):
        yield line(found.seen)
        return
    _, _, volume = found
    name = volume.outputs["name"]
    yield line(f"volume {name} was created by pipeline task {volume.name} and mounted into the workers")
    for ckpt in await ctx.require_cluster().checkpoints(name):
        yield line(f"  {ckpt.path}  step {ckpt.step}  world {ckpt.world_size}  "
                   f"{'valid' if ckpt.valid else 'INVALID: ' + ckpt.problem}")


async def verify_checkpoints(ctx: StepContext) -> Evidence:
    found = _train_outputs(ctx)
    if isinstance(found, Evidence):
        return found
    result, train, volume_task = found
    cluster = ctx.require_cluster()
    volume, run = volume_task.outputs["name"], train.outputs.get("run", "")
    if volume not in {v.name for v in await cluster.volumes()}:
        return ctx.evidence(False, f"volume {volume} (made by task {volume_task.name}) is not on the "
                                   "platform any more; run step 4 again")
    checkpoints = [c for c in await cluster.checkpoints(volume) if not run or c.run == run]
    valid = [c for c in checkpoints if c.valid]
    details = [f"volume {volume}: created by task {volume_task.name} of pipeline run {result.run_id}",
               *[f"{c.path}: step {c.step}, world {c.world_size}, {'valid' if c.valid else c.problem}"
                 for c in checkpoints]]
    lister = find_task(result, "list-checkpoints")
    if lister is not None:
        details.append(f"pipeline task {lister.name} (another pod) {lister.state.value}: "
                       f"{lister.outputs.get('valid', '?')} valid checkpoints")
    if not valid:
        return ctx.evidence(False, f"no valid checkpoint of run {run or '?'} on volume {volume}", details)
    newest = max(c.step for c in valid)
    return ctx.evidence(True, f"{len(valid)} valid checkpoint files of run {run} on volume {volume} "
                              f"(newest step {newest}), read by a separate reader", details)


# ---------------------------------------------------------------- step 8: Ray Train


async def run_ray(ctx: StepContext):
    from backend.pipelines.runs import run_ray_pipeline

    async for update in run_pipeline(ctx, lambda on_event: run_ray_pipeline(
            ctx.settings, workers=2, steps=RAY_STEPS, on_event=on_event)):
        yield update


async def verify_ray(ctx: StepContext) -> Evidence:
    result = load_run(ctx)
    if result is None:
        return ctx.evidence(False, _no_run("8"))
    if not result.ok:
        return ctx.evidence(False, f"the run {result.run_id} ended {result.state.value}: {result.error}")
    task = find_task(result, "ray-train")
    if task is None:
        return ctx.evidence(False, f"the run {result.run_id} has no Ray Train task")
    reporters: dict[int, int] = {}  # rank -> reports
    for text in task.logs:
        fields = parse_line(text) if "event=reported" in text else {}
        if fields.get("event") == "reported" and fields.get("rank", "").isdigit():
            reporters[int(fields["rank"])] = reporters.get(int(fields["rank"]), 0) + 1
    losses = same_loss_every_step(task.logs, f"task {task.name} of run {result.run_id}")
    details = [f"pipeline run {result.run_id}: task {task.name} {task.state.value}",
               *[f"rank {r}: {n} reports to ray.train.report" for r, n in sorted(reporters.items())],
               f"losses: {losses.seen}"]
    run = task.outputs.get("run")
    volume_task = find_task(result, "create")
    if run and volume_task is not None and ctx.cluster is not None:
        metrics = [m for m in await ctx.cluster.read_metrics(volume=volume_task.outputs["name"])
                   if m.run.endswith(run)]
        details += [f"metrics.json of {m.run}: launcher {m.launcher}, {count(m.world_size, 'worker')}, final loss "
                    f"{m.final_loss:.6f}" for m in metrics]
        if not metrics or metrics[0].launcher != "ray" or metrics[0].world_size != 2:
            return ctx.evidence(False, f"the volume holds no metrics of a two-worker Ray run {run}", details)
    if sorted(reporters) != [0, 1]:
        return ctx.evidence(False, f"the task log shows reports from rank(s) {sorted(reporters) or 'none'}, "
                                   "not from two Ray Train workers", details)
    if not losses.ok:
        return ctx.evidence(False, f"the two Ray Train workers disagree: {losses.seen}", details)
    return ctx.evidence(True, f"run {result.run_id} Succeeded: Ray Train workers 0 and 1 reported "
                              f"metrics {reporters[0]} and {reporters[1]} times; {losses.seen}", details)


HANDLERS = {
    "1": Handler(verify=verify_print, run=run_print),
    "4": Handler(verify=verify_trainjob, run=run_train, unavailable=needs_cluster),
    "5": Handler(verify=verify_checkpoints, run=show_volume, unavailable=needs_cluster),
    "8": Handler(verify=verify_ray, run=run_ray),
}
