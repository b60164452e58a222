"""Running one of the lesson's pipelines from a step: its events become RunUpdates as they happen,
and the run's outcome (each task's state, outputs and log, as the platform reported them) is kept
in the step's run directory for the verify to read."""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable

from backend.cluster import ClusterError
from backend.lesson.context import RunUpdate, StepContext, job_started, line
from training.atomic import write_atomic
from backend.models import LABEL_JOB

if TYPE_CHECKING:
    from backend.pipelines.results import OnEvent, PipelineEvent, PipelineRunResult

RECORD = "pipeline-run.json"
TIMEOUT = 900.0  # the longest pipeline (step 12's full run, Ray included) takes a minute or two
_JOB_CREATED = re.compile(r"^trainjob/(\S+) (created|configured|unchanged)", re.IGNORECASE)


def _updates(event: "PipelineEvent") -> list[RunUpdate]:
    state = event.state.value if event.state else ""
    if event.kind == "task-log":
        found = _JOB_CREATED.match(event.text)
        shown = [line(f"[{event.task}] {event.text}")]
        return shown + ([job_started(found.group(1))] if found else [])
    text = {
        "note": f"note: {event.text}",
        "pipeline-started": f"pipeline {event.text} started",
        "task-started": f"task {event.task} started",
        "task-finished": f"task {event.task}: {state}" + (f" ({event.text})" if event.text else ""),
        "pipeline-finished": f"pipeline {event.text}: {state}",
    }.get(event.kind)
    return [line(text)] if text else []


async def run_pipeline(ctx: StepContext, start: Callable[["OnEvent"], Awaitable["PipelineRunResult"]],
                       record: str = RECORD, timeout: float = TIMEOUT) -> AsyncIterator[RunUpdate]:
    """Start the run with `start(on_event)`, stream its events, keep its result as `record`.
    A run still going after `timeout` seconds is stopped (its tasks with it): ClusterError."""
    (ctx.run_dir / record).unlink(missing_ok=True)  # a failed run must not leave an older success
    events: asyncio.Queue = asyncio.Queue()
    run = asyncio.create_task(start(events.put_nowait))
    deadline = time.monotonic() + timeout
    running: dict[str, str] = {}  # task -> the TrainJob it started, for the message on a timeout
    try:
        while not run.done() or not events.empty():
            if events.empty():
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({getter, run}, timeout=max(0.0, deadline - time.monotonic()),
                                   return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    if not run.done():
                        raise ClusterError(f"the pipeline run did not finish within {timeout:.0f} s and "
                                           f"was stopped{_stuck(running)}")
                    continue
                event = getter.result()
            else:
                event = events.get_nowait()
            if event.kind == "task-started":
                running[event.task] = ""
            elif event.kind == "task-finished":
                running.pop(event.task, None)
            for update in _updates(event):
                if update.kind == "job" and event.task in running:
                    running[event.task] = update.job
                yield update
        result = run.result()  # ClusterError / ManifestError from the runner surface here
    finally:
        if not run.done():  # the learner stopped the step: stop the pipeline and its tasks
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
    write_atomic(ctx.run_dir / record, result.model_dump_json(indent=2) + "\n")
    yield line(f"pipeline run {result.run_id}: {result.state.value}"
               + (f" — {result.error}" if result.error else ""))


def _stuck(running: dict[str, str]) -> str:
    if not running:
        return ""
    task, job = next(iter(running.items()))
    where = f" (TrainJob {job}: kubectl get pods -l {LABEL_JOB}={job})" if job else ""
    return f": task {task} was still running{where}"


def load_run(ctx: StepContext, record: str = RECORD, step_id: str | None = None) -> "PipelineRunResult | None":
    """The kept outcome of a step's pipeline run (of `step_id`, default this step), or None."""
    from backend.pipelines.results import PipelineRunResult

    directory = ctx.run_dir if step_id is None else ctx.run_dir.parent / f"step-{step_id}"
    try:
        return PipelineRunResult.model_validate_json((directory / record).read_text())
    except (OSError, ValueError):
        return None


def find_task(result: "PipelineRunResult", prefix: str):
    """The first task whose name starts with `prefix` (e.g. "create-volume" or "createpvc")."""
    return next((t for t in result.tasks if t.name.startswith(prefix)), None)
