"""Step 6: kill a worker mid-training; the group comes back and resumes from the last checkpoint.

The run applies a two-worker TrainJob with the checkpoint volume and follows its logs until rank 0
has saved a checkpoint and the workers are past it. Then, in the cockpit (ctx.interactive), the
kill is the learner's: the job is paced to leave them about a minute, the run says "kill a worker
now" and waits, and it ends once the new group has trained a step after its resume (the step's
done-when; the job trains on). Headless, the run kills one worker pod itself and follows the
recreated group to the end. The verify reads the job's pods and logs back from the platform.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from backend.cluster import Cluster, ClusterError, NotFound
from backend.lesson.context import Handler, StepContext, job_started, line, needs_cluster
from backend.lesson.jobs import (JobRecord, apply_runtime_and_volume, fresh_name, job_logs,
                                 lesson_trainjob, step_of)
from backend.models import Evidence, JobPhase, Pod, PodPhase
from training.logfmt import parse_line

STEPS = 40
CKPT_EVERY = 5
STEP_DELAY = 0.1  # long enough to kill a worker mid-run, short enough to stay a quick step
# In the cockpit a person does the kill: the same job, paced to leave them time (~60 s).
INTERACTIVE_STEPS = 300
INTERACTIVE_STEP_DELAY = 0.2
TIMEOUT = 600.0


async def _worker_to_kill(cluster: Cluster, job: str) -> Pod:
    running = [p for p in await cluster.list_pods(job) if p.phase is PodPhase.RUNNING]
    if not running:
        raise ClusterError(f"TrainJob {job} has no running worker to kill (it may have finished)")
    newest = max(p.restart_attempt for p in running)
    group = [p for p in running if p.restart_attempt == newest]
    return max(group, key=lambda p: p.rank)  # a non-zero rank: "a worker", not the one saving


async def run_kill_and_resume(ctx: StepContext):
    cluster = ctx.require_cluster()
    for result in await apply_runtime_and_volume(cluster):
        yield line(result)
    name = fresh_name("lesson-resume")
    JobRecord(jobs=[name]).save(ctx)
    steps, delay = (INTERACTIVE_STEPS, INTERACTIVE_STEP_DELAY) if ctx.interactive else (STEPS, STEP_DELAY)
    yield line(await cluster.apply(lesson_trainjob(name, 2, steps, CKPT_EVERY, delay)))
    yield job_started(name)
    yield line("waiting for the first checkpoint on the volume…")
    saved: int | None = None
    killed: Pod | None = None
    asked = False  # interactive: the learner was told to kill a worker
    restarted = False  # a new group started after the checkpoint (whoever killed the worker)
    resumed: tuple[str, int] | None = None  # (the pod, the step) of the new group's resume
    try:
        async with asyncio.timeout(TIMEOUT), aclosing(cluster.stream_logs(name, follow=True)) as stream:
            async for batch in stream:
                for log in batch:
                    fields = parse_line(log.text) if "event=" in log.text else {}
                    if killed is None and saved is None and fields.get("event") == "checkpoint_saved":
                        saved = int(fields["step"])
                        yield line(f"rank {log.rank} saved the checkpoint of step {saved}")
                    elif ctx.interactive and not asked and saved is not None and (step_of(log) or 0) > saved:
                        asked = True
                        pods = sorted(p.name for p in await cluster.list_pods(name)
                                      if p.phase is PodPhase.RUNNING)
                        yield line(f"kill a worker now: ctrl+k on a pod in the pods panel, or from "
                                   f"another terminal `kubectl delete pod {pods[-1] if pods else '<pod>'}`; "
                                   f"the job trains for about {steps * delay:.0f} s, then this step checks it")
                    elif ctx.interactive and not restarted and asked and fields.get("event") == "start":
                        restarted = True
                        yield line("a worker was killed: the group is back, loading the checkpoint…")
                    elif not ctx.interactive and killed is None and saved is not None and (step_of(log) or 0) > saved:
                        killed = await _worker_to_kill(cluster, name)
                        await cluster.kill_pod(killed.name)
                        yield line(f"step {step_of(log)} reached: killed worker pod {killed.name} "
                                   f"(rank {killed.rank})")
                    elif (killed is not None or restarted) and fields.get("event") == "resumed":
                        resumed = (log.pod, int(fields.get("from_step") or 0))
                        yield line(f"{log.pod} (rank {log.rank}) resumed from step {resumed[1]}")
                    elif ctx.interactive and resumed is not None and log.pod == resumed[0] \
                            and (step_of(log) or 0) > resumed[1]:
                        # The done-when is the resume: the learner need not wait out the paced run.
                        yield line(f"it trained step {step_of(log)} after the resume: done; the job trains "
                                   f"on to step {steps} in the pods and logs panels")
                        return
            summary = await cluster.wait_job(name, frozenset({JobPhase.COMPLETE, JobPhase.FAILED}),
                                             timeout=TIMEOUT)
    except TimeoutError:
        raise ClusterError(f"TrainJob {name} did not finish within {TIMEOUT:.0f} s") from None
    yield line(f"TrainJob {name}: {summary.phase.value}, restart attempt {summary.restart_attempt}")


async def verify_resumed(ctx: StepContext) -> Evidence:
    """The job this step's run started, else any TrainJob whose group restarted: a learner who
    applied manifests/trainjob.yaml and deleted a worker pod with kubectl did the step too."""
    cluster = ctx.require_cluster()
    record = JobRecord.load(ctx)
    recorded = record.jobs[:1] if record else []
    jobs = sorted(await cluster.list_jobs(), key=lambda j: j.created, reverse=True)
    restarted = [j.name for j in jobs if j.launcher == "torchrun" and j.restart_attempt >= 1
                 and j.name not in recorded]
    first: Evidence | None = None
    for name in recorded + restarted:
        try:
            evidence = await _resumed(ctx, cluster, name)
        except NotFound:
            continue  # deleted since: another candidate may still show it
        if evidence.ok:
            return evidence
        first = first or evidence
    if first is not None:
        return first
    never = [j.name for j in jobs if j.launcher == "torchrun"]
    if never:
        return ctx.evidence(False, f"no TrainJob's worker group restarted ({', '.join(never[:3])}: restart "
                                   "attempt 0): delete a worker pod while it trains (kubectl delete pod), or "
                                   "kfcockpit lesson run 6")
    return ctx.evidence(False, "no run yet: kfcockpit lesson run 6 kills a worker of a fresh job; or do it "
                               "with kubectl (apply manifests/trainjob.yaml, delete one of its worker pods "
                               "mid-training)")


async def _resumed(ctx: StepContext, cluster: Cluster, name: str) -> Evidence:
    summary = await cluster.get_job(name)
    pods = {p.name: p for p in await cluster.list_pods(name)}
    lines = await job_logs(cluster, name)
    first_step: dict[str, int] = {}  # pod -> first step it printed after starting
    resumes: list[tuple[int, int, str, int]] = []  # (attempt, from_step, pod, rank)
    for log in lines:
        if step_of(log) is not None:
            first_step.setdefault(log.pod, step_of(log))
        if "event=resumed" in log.text:
            fields = parse_line(log.text)
            pod = pods.get(log.pod)
            attempt = pod.restart_attempt if pod else -1
            resumes.append((attempt, int(fields.get("from_step", "0")), log.pod, log.rank))
    details = [f"TrainJob {name}: {summary.phase.value}, restart attempt {summary.restart_attempt} "
               f"of at most {summary.max_restarts}"]
    restarted = [r for r in resumes if r[0] >= 1]
    if not restarted:
        if summary.restart_attempt == 0 and not any(p.restart_attempt for p in pods.values()):
            return ctx.evidence(False, "the worker group never restarted (restart attempt 0): no "
                                       "worker was killed before the job finished", details)
        fresh = sorted({(p.restart_attempt, first_step.get(p.name)) for p in pods.values()
                        if p.restart_attempt >= 1 and first_step.get(p.name) is not None})
        seen = "the restarted group loaded no checkpoint"
        if fresh:
            seen += f" (restart attempt {fresh[0][0]} started again at step {fresh[0][1]})"
        return ctx.evidence(False, seen, details)
    attempt, from_step, pod, rank = restarted[0]
    continued = [step_of(log) for log in lines if log.pod == pod and step_of(log) is not None]
    details.append(f"{pod} (rank {rank}) printed event=resumed from_step={from_step}"
                   + (f", then steps {continued[0]}..{continued[-1]}" if continued else ""))
    if from_step <= 0:
        return ctx.evidence(False, f"restart attempt {attempt} resumed from step {from_step}, "
                                   "not from a later step than zero", details)
    if not continued or continued[0] != from_step + 1:
        return ctx.evidence(False, f"restart attempt {attempt} loaded step {from_step} but did not "
                                   "continue training from there", details)
    return ctx.evidence(True, f"restart attempt {attempt} resumed from step {from_step} > 0", details)


HANDLERS = {"6": Handler(verify=verify_resumed, run=run_kill_and_resume, unavailable=needs_cluster)}
