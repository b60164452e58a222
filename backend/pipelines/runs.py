"""Run the lesson's pipelines on whichever platform the settings name: the API the lesson engine,
the CLI and the cockpit call.

    result = await run_print_pipeline(settings, message="hi", workers=2, on_event=show)
    result.ok, result.task("print-inputs").logs, result.output("print-inputs")

Every function returns a `PipelineRunResult` (each task's state, outputs and log) and calls
`on_event` with each `PipelineEvent` as it happens. On the embedded cluster pipelines run with
kfp.local (tasks are local processes; platform settings are ignored and the result says so); on
Kubernetes they are submitted to the Pipelines endpoint (`settings.kfp_host`, default the
port-forward address). Bad input (not a compiled pipeline, unknown parameter, endpoint down)
raises ManifestError / ClusterError with a one-line message before anything runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from backend.connect import capabilities
from backend.pipelines.compiled import COMPILED_FILES, compile_pipeline, load_compiled
from backend.pipelines.results import OnEvent, PipelineRunResult
from backend.settings import Settings


def target_of(settings: Settings) -> str:
    """Which compiled form a platform runs: "local" where pipelines run on this machine with
    kfp.local, else "kube" (a Pipelines endpoint; CreatePVC)."""
    return "local" if capabilities(settings).pipelines_here else "kube"


def committed_file(settings: Settings) -> Path:
    """The committed compiled pipeline for this platform (manifests/pipeline[-local].yaml)."""
    return COMPILED_FILES[target_of(settings)]


async def run_pipeline_file(settings: Settings, path: Path | str | None = None,
                            arguments: dict[str, Any] | None = None,
                            on_event: OnEvent | None = None) -> PipelineRunResult:
    """Run a compiled pipeline file (default: the committed one for this platform)."""
    compiled = load_compiled(path or committed_file(settings))
    checked = compiled.check_arguments(arguments or {})
    if target_of(settings) == "kube":
        from backend.pipelines.remote_runner import run_remote

        return await run_remote(settings, compiled, checked, on_event)
    from backend.pipelines.local_runner import run_local

    return await run_local(settings, compiled, checked, on_event)


async def run_pipeline(settings: Settings, pipeline: str, arguments: dict[str, Any] | None = None,
                       on_event: OnEvent | None = None) -> PipelineRunResult:
    """Compile one of the lesson's pipelines ("print", "train", "ray", "lesson") from its
    definition for this platform, into the workspace, and run that file."""
    path = settings.workspace / "pipelines" / f"{pipeline}-{target_of(settings)}.yaml"
    await asyncio.to_thread(compile_pipeline, path, pipeline, target_of(settings))
    return await run_pipeline_file(settings, path, arguments, on_event)


async def run_print_pipeline(settings: Settings, message: str = "hello from kfcockpit", workers: int = 2,
                             on_event: OnEvent | None = None) -> PipelineRunResult:
    """Lesson step 1: one task prints its inputs; its log holds `input message=...`."""
    return await run_pipeline(settings, "print", {"message": message, "workers": workers}, on_event)


async def run_training_pipeline(settings: Settings, workers: int = 2, steps: int = 60, ckpt_every: int = 5,
                                step_delay: float = 0.1, on_event: OnEvent | None = None) -> PipelineRunResult:
    """Lesson steps 4-5: a volume, a `workers`-worker TrainJob from a task, the checkpoints read
    by another task. Outputs: create-volume/createpvc "name", train-job "job"/"run"/"world_size"…"""
    return await run_pipeline(settings, "train", {"workers": workers, "steps": steps,
                                                  "ckpt_every": ckpt_every, "step_delay": step_delay}, on_event)


async def run_ray_pipeline(settings: Settings, workers: int = 2, steps: int = 30,
                           on_event: OnEvent | None = None) -> PipelineRunResult:
    """Lesson step 8: the Ray Train component (ray declared in packages_to_install), 2 CPU workers."""
    return await run_pipeline(settings, "ray", {"workers": workers, "steps": steps}, on_event)


async def run_lesson_pipeline(settings: Settings, arguments: dict[str, Any] | None = None,
                              from_committed_file: bool = True,
                              on_event: OnEvent | None = None) -> PipelineRunResult:
    """Lessons steps 7, 11, 12: the full pipeline, by default from the committed compiled file."""
    if from_committed_file:
        return await run_pipeline_file(settings, None, arguments, on_event)
    return await run_pipeline(settings, "lesson", arguments, on_event)
