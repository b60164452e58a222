"""Steps 9, 11 and 12: what the pipeline definition itself pins, declares and reproduces.

  9   every component and every worker pod runs the pinned base image; nothing is installed at start
  11  a fresh run from the definition: its TrainJob's workers get the declared volume mount (and the
      declared requests and node selector, which the definition hands to the TrainJob)
  12  the committed compiled file is what the definition compiles to, and a run from that file on a
      clean cluster finishes with the same worker count and a checkpoint on its volume
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
import tempfile
from pathlib import Path

from backend.cluster import ClusterError, NotFound
from backend.lesson.context import Handler, StepContext, line, needs_cluster
from backend.lesson.evidence import readable
from backend.lesson.jobs import apply_runtime_and_volume, job_logs
from backend.lesson.pipeline_runs import find_task, load_run, run_pipeline
from training.atomic import write_atomic
from backend.models import Evidence, JobPhase, yaml_documents
from backend.words import count

# What a package install prints (pip's phases); a pinned image shows none of it.
INSTALL_PHASE = re.compile(r"pip install|Collecting \S|Installing collected packages|"
                           r"Successfully installed|Downloading \S+\.(whl|tar\.gz)")
CLEAN_HOME = "clean-cluster"  # step 12's clean embedded cluster, under the step's run directory


def _pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and bool(tag) and "/" not in tag and tag != "latest"


def _executors(path: Path) -> dict[str, dict]:
    spec = yaml_documents(path.read_text(), str(path))[0]
    return {name: e.get("container") or {} for name, e in spec["deploymentSpec"]["executors"].items()}


def _task_inputs(path: Path, task: str) -> dict:
    """The constant inputs a task of the compiled pipeline is given (e.g. train-job's resources)."""
    spec = yaml_documents(path.read_text(), str(path))[0]
    params = spec["root"]["dag"]["tasks"][task]["inputs"]["parameters"]
    return {k: v["runtimeValue"]["constant"] for k, v in params.items() if "runtimeValue" in v}


# ---------------------------------------------------------------- step 9: the pinned base image


async def verify_pinned_image(ctx: StepContext) -> Evidence:
    from backend.pipelines.runs import committed_file

    cluster = ctx.require_cluster()
    path = committed_file(ctx.settings)
    executors = _executors(path)
    images = {c.get("image", "") for name, c in executors.items() if not name.endswith("createpvc")}
    details = [f"{path.name}: component image(s) {', '.join(sorted(images))}"]
    unpinned = sorted(i for i in images if not _pinned(i))
    if unpinned or len(images) != 1:
        return ctx.evidence(False, f"the components in {path.name} do not all run one pinned image "
                                   f"(found {', '.join(sorted(images))})", details)
    (image,) = images
    installs = sorted(name for name, c in executors.items()
                      if any("pip install" in part for part in c.get("command", []) + c.get("args", [])))
    if installs:
        return ctx.evidence(False, f"{path.name} still installs packages at start in {', '.join(installs)}",
                            details)
    found = load_run(ctx, step_id="4")
    train = find_task(found, "train-job") if found else None
    if train is None or "job" not in train.outputs:
        return ctx.evidence(False, "no TrainJob from step 4's pipeline run to look at (kfcockpit lesson run 4)",
                            details)
    name = train.outputs["job"]
    try:
        pods = await cluster.list_pods(name)
        logs = await job_logs(cluster, name)
    except NotFound:
        return ctx.evidence(False, f"TrainJob {name} of step 4 is gone; run step 4 again", details)
    details += [f"pod {p.name}: image {p.image or '(none reported)'}" for p in pods]
    if not pods or any(p.image != image for p in pods):
        return ctx.evidence(False, f"TrainJob {name}'s pods do not all show the pinned image {image}", details)
    task_lines = [text for task in found.tasks for text in task.logs]
    installing = [t for t in [log.text for log in logs] + task_lines if INSTALL_PHASE.search(t)]
    if installing:
        return ctx.evidence(False, f"an install phase shows in the log: {installing[0].strip()[:100]}", details)
    return ctx.evidence(True, f"the {len(pods)} worker pods of TrainJob {name} show {image}, the tag every "
                              f"component of {path.name} pins; no install phase in their {len(logs)} log "
                              f"lines or the pipeline tasks' {len(task_lines)}", details)


# ---------------------------------------------------------------- step 11: platform settings


async def run_from_definition(ctx: StepContext):
    from backend.pipelines.runs import run_training_pipeline

    cluster = ctx.require_cluster()
    for result in await apply_runtime_and_volume(cluster):
        yield line(result)
    yield line("compiling the train pipeline from its definition and running it fresh")
    async for update in run_pipeline(ctx, lambda on_event: run_training_pipeline(
            ctx.settings, workers=2, steps=20, step_delay=0.0, on_event=on_event), timeout=600):
        yield update


def _declared(path: Path) -> tuple[dict, dict, list[str]]:
    """(worker resources, node selector, problems) the definition gives the train-job task."""
    from backend.pipelines.compiled import load_compiled

    compiled = load_compiled(path)
    inputs = _task_inputs(path, "train-job")
    resources, selector = inputs.get("resources") or {}, inputs.get("node_selector") or {}
    problems = []
    if not (resources.get("requests") or {}).get("cpu"):
        problems.append("no CPU request for the workers")
    if not selector:
        problems.append("no node selector")
    task_platform = compiled.platform.get("exec-train-job") or {}
    if not task_platform.get("pvcMount"):
        problems.append("no PVC mount on the train-job task")
    if "exec-train-job" not in compiled.resources:
        problems.append("no resources on the train-job task")
    return resources, selector, problems


async def verify_platform_settings(ctx: StepContext) -> Evidence:
    result = load_run(ctx)
    if result is None:
        return ctx.evidence(False, "no run yet: kfcockpit lesson run 11")
    if not result.ok:
        return ctx.evidence(False, f"the run {result.run_id} ended {result.state.value}: {result.error}")
    resources, selector, problems = _declared(Path(result.file))
    declared = {"requests": resources.get("requests"), "limits": resources.get("limits")}
    details = [f"definition {result.file}: worker {readable(declared)}, node selector {readable(selector)}"]
    if problems:
        return ctx.evidence(False, f"the definition declares {'; '.join(problems)}", details)
    train, volume_task = find_task(result, "train-job"), find_task(result, "create")
    cluster = ctx.require_cluster()
    name, volume = train.outputs["job"], volume_task.outputs["name"]
    job = await cluster.get_job(name)
    pods = await cluster.list_pods(name)
    written = [c for c in await cluster.checkpoints(volume) if c.valid and c.run == train.outputs.get("run")]
    details += [f"TrainJob {name}: {job.phase.value}, {len(pods)} worker pods, volumes {readable(job.volumes)}",
                f"{count(len(written), 'checkpoint')} the workers wrote through the mount onto {volume}"]
    if volume not in job.volumes:
        return ctx.evidence(False, f"TrainJob {name} does not mount the run's volume {volume}", details)
    if job.phase is not JobPhase.COMPLETE or len(pods) != 2 or not written:
        return ctx.evidence(False, f"TrainJob {name} is {job.phase.value} with {count(len(pods), 'pod')} and "
                                   f"{count(len(written), 'checkpoint')} on {volume}", details)
    if ctx.capabilities.pods_here:
        # The embedded scheduler filters nodes by requests and selectors as kube-scheduler does
        # (controllers/scheduler.py); only the pipeline's own tasks run unconstrained.
        details.append("the embedded cluster's scheduler placed the workers by the declared requests "
                       "and node selector, as kube-scheduler does (a worker asking for more than a node "
                       "has stays Pending: 0/N nodes are available); kfp.local ignores the pipeline "
                       "tasks' own settings")
    return ctx.evidence(True, f"a fresh run from the definition gave TrainJob {name} 2 worker pods "
                              f"mounting {volume} (they wrote {count(len(written), 'checkpoint')} there), with "
                              f"requests ({readable(resources['requests'])}) and node selector "
                              f"{readable(selector)} declared",
                        details)


# ---------------------------------------------------------------- step 12: the compiled file


_COMPILE = ("import sys; from backend.pipelines.compiled import compile_pipeline; "
            "compile_pipeline(sys.argv[1], 'lesson', sys.argv[2])")


async def compiles_to_committed(committed: Path, target: str) -> str | None:
    """None when compiling the definition gives exactly the committed bytes, else why not."""
    with tempfile.TemporaryDirectory(prefix="kfcockpit-lesson-") as tmp:
        fresh = Path(tmp) / "pipeline.yaml"
        proc = await asyncio.create_subprocess_exec(  # kfp stays out of the cockpit's process
            sys.executable, "-c", _COMPILE, str(fresh), target,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        if proc.returncode != 0:
            return f"the definition does not compile: {err.decode().strip().splitlines()[-1:]}"
        if fresh.read_bytes() != committed.read_bytes():
            return f"{committed.name} differs from what the definition compiles to (compile and commit it)"
    return None


def _clean_cluster(ctx: StepContext):
    """Step 12's clean cluster, where the platform makes one (the embedded cluster: a new one
    under the step's run directory; it must not outlive the step); None where it does not
    (Kubernetes: the cluster in the settings; a fresh cluster is the e2e suite's job)."""
    fresh = ctx.capabilities.fresh
    return None if fresh is None else fresh(ctx.run_dir / CLEAN_HOME)


def _clean_settings(ctx: StepContext):
    clean = _clean_cluster(ctx)
    return ctx.settings if clean is None else clean.settings


async def run_committed(ctx: StepContext):
    import shutil

    from backend.connect import connect
    from backend.pipelines.runs import committed_file, run_lesson_pipeline

    committed = committed_file(ctx.settings)
    clean = _clean_settings(ctx)
    embedded = _clean_cluster(ctx)
    if embedded is not None:
        await embedded.down()  # a previous clean cluster, if one was left running
        shutil.rmtree(clean.home, ignore_errors=True)
        yield line(f"a clean cluster in {clean.home}")
    cluster = await asyncio.to_thread(connect, clean)
    try:
        for result in await apply_runtime_and_volume(cluster):
            yield line(result)
        digest = hashlib.sha256(committed.read_bytes()).hexdigest()
        write_atomic(ctx.run_dir / "committed.sha256", f"{digest}  {committed}\n")
        yield line(f"running the committed {committed.name} (sha256 {digest[:12]}…)")
        async for update in run_pipeline(ctx, lambda on_event: run_lesson_pipeline(
                clean, from_committed_file=True, on_event=on_event)):
            if update.kind == "job" and embedded is not None:
                # on the clean cluster, which the cockpit does not watch (nor follow): said, not announced
                yield line(f"TrainJob {update.job} started on the clean cluster "
                           f"(KUBECONFIG={embedded.kubeconfig} kubectl get pods)")
            else:
                yield update
    finally:
        if embedded is not None:
            await embedded.down()
        await cluster.close()


async def verify_reproduced(ctx: StepContext) -> Evidence:
    from backend.connect import connect
    from backend.pipelines.runs import committed_file, target_of

    committed = committed_file(ctx.settings)
    problem = await compiles_to_committed(committed, target_of(ctx.settings))
    if problem:
        return ctx.evidence(False, problem)
    result = load_run(ctx)
    if result is None:
        return ctx.evidence(False, "no run yet: kfcockpit lesson run 12")
    details = [f"{committed.name} is exactly what the definition compiles to",
               f"pipeline run {result.run_id} from {result.file}: {result.state.value}"]
    if Path(result.file).resolve() != committed.resolve():
        return ctx.evidence(False, f"the run used {result.file}, not the committed {committed.name}", details)
    digest = hashlib.sha256(committed.read_bytes()).hexdigest()
    if not (ctx.run_dir / "committed.sha256").read_text().startswith(digest):
        return ctx.evidence(False, f"{committed.name} changed since the run; run step 12 again", details)
    if not result.ok:
        return ctx.evidence(False, f"the run from {committed.name} ended {result.state.value}: {result.error}",
                            details)
    train, volume_task = find_task(result, "train-job"), find_task(result, "create")
    step4 = load_run(ctx, step_id="4")
    step4_train = find_task(step4, "train-job") if step4 else None
    expected = int(step4_train.outputs.get("world_size", 2)) if step4_train else 2
    embedded = _clean_cluster(ctx)
    cluster = None
    try:
        if embedded is not None:
            # Stopped on purpose after the run: reading it back starts it (no job: no warm workers).
            await embedded.up(warm=False)
        cluster = await asyncio.to_thread(connect, _clean_settings(ctx))
        job = await cluster.get_job(train.outputs["job"])
        volume = volume_task.outputs["name"]
        valid = [c for c in await cluster.checkpoints(volume) if c.valid and c.run == train.outputs.get("run")]
    except NotFound as exc:
        return ctx.evidence(False, f"the clean cluster no longer holds the run: {exc}", details)
    except ClusterError as exc:
        return ctx.evidence(False, f"cannot read the clean cluster: {exc}", details)
    finally:
        if embedded is not None:
            await embedded.down()
        if cluster is not None:
            await cluster.close()
    details.append(f"TrainJob {job.name}: {job.phase.value}, {count(job.num_nodes, 'worker')}; "
                   f"{len(valid)} valid checkpoints on {volume}")
    if job.phase is not JobPhase.COMPLETE or job.num_nodes != expected or not valid:
        return ctx.evidence(False, f"the reproduced TrainJob {job.name} is {job.phase.value} with "
                                   f"{count(job.num_nodes, 'worker')} (step 4 had {expected}) and {len(valid)} "
                                   f"checkpoints on {volume}", details)
    where = "a clean cluster" if ctx.capabilities.fresh is not None else "the cluster"
    return ctx.evidence(True, f"the committed {committed.name} reproduced the run on {where}: TrainJob "
                              f"{job.name} Complete with {count(job.num_nodes, 'worker')} like step 4, "
                              f"{count(len(valid), 'checkpoint')} on {volume}", details)


HANDLERS = {
    "9": Handler(verify=verify_pinned_image, unavailable=needs_cluster),
    "11": Handler(verify=verify_platform_settings, run=run_from_definition, unavailable=needs_cluster),
    "12": Handler(verify=verify_reproduced, run=run_committed, unavailable=needs_cluster),
}
