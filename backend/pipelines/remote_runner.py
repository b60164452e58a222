"""Submit a compiled pipeline to a cluster's Pipelines endpoint with kfp.Client and follow it.

The endpoint is usually reached through a port-forward of the Pipelines UI service, which proxies
the API: `kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80` -> http://localhost:8080.
The Pipelines API offers no watch, only GET of a run (kfp.Client's own wait_for_run_completion
polls it too), so following a run means asking for it at a steady interval. It returns no task
logs or parameter outputs either: those are read from each finished task's pod (`_TaskLogs`).
"""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlparse

from backend.cluster import ClusterError, Timeout, Unavailable
from backend.pipelines.compiled import CompiledPipeline
from backend.pipelines.results import OnEvent, PipelineEvent, PipelineRunResult, TaskOutcome, TaskState
from backend.pipelines.task_log import TaskLogFilter
from backend.settings import Settings

DEFAULT_KFP_HOST = "http://localhost:8080"
# Where a standalone Pipelines install runs the task pods (and so the TrainJobs they create).
PIPELINES_NAMESPACE = "kubeflow"
PORT_FORWARD = "kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80"
EXPERIMENT = "kfcockpit"
POLL_SECONDS = 3.0
_STATES = {"PENDING": TaskState.PENDING, "RUNNING": TaskState.RUNNING, "SUCCEEDED": TaskState.SUCCEEDED,
           "SKIPPED": TaskState.SKIPPED, "FAILED": TaskState.FAILED, "CANCELING": TaskState.FAILED,
           "CANCELED": TaskState.FAILED, "PAUSED": TaskState.RUNNING}


def kfp_host(settings: Settings) -> str:
    return (settings.kfp_host or DEFAULT_KFP_HOST).rstrip("/")


def check_endpoint(host: str, timeout: float = 5.0) -> str:
    """Ask the endpoint's healthz; returns its API version line, or raises ClusterError in one line."""
    parsed = urlparse(host)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ClusterError(f"--kfp-host {host!r} is not an http(s) URL, e.g. {DEFAULT_KFP_HOST}")
    url = f"{host}/apis/v2beta1/healthz"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - http(s) checked above
            body = response.read(4096).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        raise ClusterError(f"{host} answered HTTP {exc.code} at /apis/v2beta1/healthz: not a "
                           "Kubeflow Pipelines v2 endpoint (is --kfp-host the Pipelines UI or API?)") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unavailable(f"the Pipelines endpoint {host} is not reachable ({reason}); "
                          f"start a port-forward: {PORT_FORWARD}") from None
    return body.strip()


def _client(host: str):
    import warnings

    import kfp

    with warnings.catch_warnings():  # "only works with KFP v2.0.0-beta.2 and later": it is
        warnings.simplefilter("ignore", FutureWarning)
        return kfp.Client(host=host)


def _api_error(exc: Exception) -> ClusterError:
    body = getattr(exc, "body", None) or str(exc)
    first = str(body).strip().splitlines()[0] if str(body).strip() else type(exc).__name__
    return ClusterError(f"the Pipelines endpoint refused the run: {first[:300]}")


class _TaskLogs:
    """Reads a finished task's pod log through the Kubernetes API (the Pipelines API serves none):
    the lines it printed and the outputs it reported (`task_log`). Without access to the cluster
    the run goes on without logs, and says so once."""

    def __init__(self, settings: Settings, emit: OnEvent):
        self.settings, self.emit = settings, emit
        self.conn = None
        self.problem = ""

    async def read(self, task: TaskOutcome) -> None:
        if not task.pod or self.problem:
            return
        from kubernetes import client

        try:
            if self.conn is None:
                from backend.kube.connection import Connection

                self.conn = await asyncio.to_thread(Connection.open, self.settings)
            text = await self.conn.call(client.CoreV1Api(self.conn.api).read_namespaced_pod_log, task.pod,
                                        PIPELINES_NAMESPACE, container="main", what=f"log of pod {task.pod}")
        except ClusterError as exc:
            self.problem = str(exc)
            self.emit(PipelineEvent(kind="note", text=f"task logs and outputs are not available: {exc}"))
            return
        shown = TaskLogFilter()
        task.logs = shown.feed_all((text or "").splitlines())
        task.outputs.update(shown.outputs)
        for line in task.logs:
            self.emit(PipelineEvent(kind="task-log", task=task.name, text=line))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


async def run_remote(settings: Settings, compiled: CompiledPipeline, arguments: dict[str, Any],
                     on_event: OnEvent | None = None, timeout: float = 4 * 3600) -> PipelineRunResult:
    host = kfp_host(settings)
    await asyncio.to_thread(check_endpoint, host)
    emit = on_event or (lambda event: None)
    run_name = f"{compiled.name} {time.strftime('%Y-%m-%d %H:%M:%S')}"

    def submit():
        client = _client(host)
        try:
            return client, client.create_run_from_pipeline_package(
                compiled.path, arguments=arguments, run_name=run_name, experiment_name=EXPERIMENT)
        except Exception as exc:  # noqa: BLE001 - kfp_server_api.ApiException and friends: one line for the user
            raise _api_error(exc) from None

    client, submitted = await asyncio.to_thread(submit)
    result = PipelineRunResult(pipeline=compiled.name, backend="kube", file=compiled.path,
                               run_id=submitted.run_id, state=TaskState.RUNNING, arguments=arguments,
                               started=time.time(), location=f"{host}/#/runs/details/{submitted.run_id}")
    tasks = {name: TaskOutcome(name=name) for name in compiled.tasks}
    logs = _TaskLogs(settings, emit)
    emit(PipelineEvent(kind="pipeline-started", text=compiled.name))
    emit(PipelineEvent(kind="note", text=f"run {submitted.run_id}: {result.location}"))
    deadline = time.monotonic() + timeout
    try:
        while True:
            run = await asyncio.to_thread(client.get_run, submitted.run_id)
            for detail in (run.run_details.task_details if run.run_details else None) or []:
                task = tasks.get(detail.display_name or "")
                if task is not None:
                    await _update(task, detail, emit, logs)
            state = _STATES.get(str(run.state or "").upper(), TaskState.RUNNING)
            if state.finished:
                break
            if time.monotonic() > deadline:
                raise Timeout(f"run {submitted.run_id} still {run.state} after {timeout:.0f}s: {result.location}")
            await asyncio.sleep(POLL_SECONDS)  # the API has no watch (see the module docstring)
    finally:
        logs.close()
    _name_the_volume(tasks)
    result.state, result.finished = state, time.time()
    result.tasks = list(tasks.values())
    if run.error is not None and getattr(run.error, "message", None):
        result.error = run.error.message
    emit(PipelineEvent(kind="pipeline-finished", text=compiled.name, state=state))
    return result


def _name_the_volume(tasks: dict[str, TaskOutcome]) -> None:
    """CreatePVC runs inside KFP's driver, with no pod log: its `name` output is the claim the
    tasks that mounted it report, so a run's outcome has the same shape on both platforms."""
    volume = tasks.get("createpvc")
    reported = [t.outputs["volume"] for t in tasks.values() if "volume" in t.outputs]
    if volume is not None and reported and "name" not in volume.outputs:
        volume.outputs["name"] = reported[0]


async def _update(task: TaskOutcome, detail, emit: OnEvent, logs: _TaskLogs) -> None:
    state = _STATES.get(str(detail.state or "").upper(), TaskState.PENDING)
    pods = [c.pod_name for c in detail.child_tasks or [] if getattr(c, "pod_name", None)]
    task.pod = detail.pod_name or (pods[-1] if pods else task.pod)
    if state == task.state:
        return
    if state == TaskState.RUNNING or (state.finished and task.started is None):
        task.started = detail.start_time.timestamp() if detail.start_time else time.time()
        emit(PipelineEvent(kind="task-started", task=task.name, state=TaskState.RUNNING,
                           text=f"pod {task.pod}" if task.pod else ""))
    task.state = state
    if state.finished:
        task.finished = detail.end_time.timestamp() if detail.end_time else time.time()
        task.error = (getattr(detail.error, "message", "") or "") if detail.error else ""
        await logs.read(task)
        emit(PipelineEvent(kind="task-finished", task=task.name, state=state, text=task.error))
