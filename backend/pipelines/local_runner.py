"""Run a compiled pipeline with kfp.local against the embedded cluster, reporting as it goes.

kfp.local runs in a child process (`local_child`), whose tasks reach the same embedded cluster
as the cockpit through KFCOCKPIT_HOME. Its progress lines become `PipelineEvent`s the moment
they are printed; each task's outputs are read from the files kfp.local writes under the run's
own pipeline root.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Any

from backend.models import ManifestError
from backend.pipelines.compiled import COMPILED_FILES, CompiledPipeline
from backend.project import PROJECT_ROOT
from backend.pipelines.kfp_local_log import KfpLocalLog
from backend.pipelines.platform import IGNORED_LOCALLY
from backend.pipelines.results import OnEvent, PipelineEvent, PipelineRunResult, TaskOutcome, TaskState
from backend.pipelines.task_runtime import BACKEND_ENV
from backend.settings import Settings


# The component that applies a TrainJob (components.train_job; "train-job-2" when used twice).
TRAINJOB_TASK = "train-job"


def runs_dir(settings: Settings) -> Path:
    """Where local runs keep their outputs (one directory per run)."""
    return settings.workspace / "pipeline-runs"


def new_run_id(pipeline: str) -> str:
    return f"{pipeline}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


class _Run:
    """The state of one run as events arrive: task outcomes, in pipeline order."""

    def __init__(self, compiled: CompiledPipeline, root: Path, on_event: OnEvent | None):
        self.tasks = {name: TaskOutcome(name=name) for name in compiled.tasks}
        self.root = root
        self.on_event = on_event

    def handle(self, event: PipelineEvent) -> None:
        task = self.tasks.setdefault(event.task, TaskOutcome(name=event.task)) if event.task else None
        if event.kind == "task-started":
            task.state, task.started = TaskState.RUNNING, event.at
        elif event.kind == "task-log":
            task.logs.append(event.text)
        elif event.kind == "task-finished":
            task.state, task.finished = event.state, event.at
            task.outputs = self._outputs(task.name)
            if task.state == TaskState.FAILED:
                task.error = _last_error(task.logs)
                event.text = task.error
        if self.on_event:
            self.on_event(event)

    def _outputs(self, task: str) -> dict[str, Any]:
        for found in self.root.glob(f"*/{task}/executor_output.json"):
            try:
                return json.loads(found.read_text()).get("parameterValues") or {}
            except (OSError, ValueError):
                return {}
        return {}


def _last_error(logs: list[str]) -> str:
    """The exception line of a failed task's traceback, else its last line."""
    for line in reversed(logs):
        text = line.strip()
        if text and ("Error:" in text or "Exception:" in text) and not text.startswith("File "):
            return text
    return next((line.strip() for line in reversed(logs) if line.strip()), "")


async def run_local(settings: Settings, compiled: CompiledPipeline, arguments: dict[str, Any],
                    on_event: OnEvent | None = None) -> PipelineRunResult:
    if not compiled.runs_locally:
        local_file = COMPILED_FILES["local"]
        raise ManifestError(
            f"{compiled.path} uses container components ({', '.join(compiled.container_executors)}) "
            f"that kfp.local cannot run (e.g. kfp-kubernetes CreatePVC); on the embedded cluster run "
            f"{local_file.relative_to(PROJECT_ROOT) if local_file.is_relative_to(PROJECT_ROOT) else local_file} "
            "(the same pipeline with a local volume task), or use --backend kube")
    run_id = new_run_id(compiled.name)
    root = runs_dir(settings) / run_id
    root.mkdir(parents=True, exist_ok=True)
    started = time.time()
    result = PipelineRunResult(pipeline=compiled.name, backend="local", file=compiled.path, run_id=run_id,
                               state=TaskState.RUNNING, arguments=arguments, started=started,
                               location=str(root),
                               notes=[IGNORED_LOCALLY] if compiled.platform else [])
    run = _Run(compiled, root, on_event)
    for note in result.notes:
        run.handle(PipelineEvent(kind="note", text=note))
    if any(task.startswith(TRAINJOB_TASK) for task in compiled.tasks):
        # Its task submits a TrainJob seconds from now (every task is a new interpreter): the
        # workers' torch import starts now instead of when the job arrives.
        from backend.connect import capabilities

        warm = capabilities(settings).warm
        if warm is not None:
            await warm()
    env = dict(os.environ, KFCOCKPIT_HOME=str(settings.home), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])))
    env[BACKEND_ENV] = "local"
    # This venv stands in for the pinned image: a task that declares packages (step 8's Ray Train
    # component) finds them installed, and must never download into the venv instead.
    env["PIP_NO_INDEX"] = "1"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "backend.pipelines.local_child", compiled.path, str(root), json.dumps(arguments),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        start_new_session=True,  # one process group: cancelling stops every task with it
        limit=1 << 20)
    parser = KfpLocalLog()
    stderr_tail: list[str] = []

    async def read_stdout() -> None:
        async for raw in proc.stdout:
            for event in parser.feed(raw.decode(errors="replace")):
                run.handle(event)

    async def read_stderr() -> None:
        async for raw in proc.stderr:
            stderr_tail[:] = (stderr_tail + [raw.decode(errors="replace").rstrip()])[-20:]

    try:
        await asyncio.gather(read_stdout(), read_stderr())
        code = await proc.wait()
    except BaseException:  # cancelled (or interrupted): do not leave tasks running
        _kill_group(proc.pid)
        await proc.wait()
        raise
    result.tasks = list(run.tasks.values())
    for task in result.tasks:
        if task.state in (TaskState.PENDING, TaskState.RUNNING):
            task.state = TaskState.SKIPPED if task.state == TaskState.PENDING else TaskState.FAILED
    result.finished = time.time()
    if parser.pipeline_state is None:  # the child stopped before kfp.local reported an outcome
        result.state = TaskState.FAILED
        last = next((line for line in reversed(stderr_tail) if line.strip()), f"exit code {code}")
        result.error = f"kfp.local stopped before the pipeline finished: {last.strip()}"
        run.handle(PipelineEvent(kind="pipeline-finished", text=compiled.name, state=result.state))
    else:
        result.state = parser.pipeline_state
        failed = [t for t in result.tasks if t.state == TaskState.FAILED]
        if failed:
            result.error = f"task {failed[0].name} failed: {failed[0].error or 'see its log'}"
    return result


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

