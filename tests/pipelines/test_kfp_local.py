"""Real kfp.local runs (SubprocessRunner, tasks as processes of this venv): what a run reports."""

# No `from __future__ import annotations`: KFP reads component parameter types as objects.
from pathlib import Path

from backend.pipelines.compiled import load_compiled
from backend.pipelines.local_runner import run_local
from backend.pipelines.results import TaskState
from backend.pipelines.runs import run_print_pipeline
from backend.settings import Settings


async def test_the_print_pipeline_runs_and_its_log_holds_the_inputs(tmp_path):
    events = []
    result = await run_print_pipeline(Settings(home=tmp_path), message="hello kfp", workers=3,
                                      on_event=events.append)

    assert result.ok, result.error
    task = result.task("print-inputs")
    assert task.state == TaskState.SUCCEEDED
    assert "input message='hello kfp'" in task.logs
    assert "input workers=3" in task.logs
    assert result.output("print-inputs") == "message='hello kfp' workers=3"
    # kfp's own executor chatter (its JSON dump of the inputs) is not part of the task's log.
    assert not any("executor_input" in line or line.startswith("[KFP Executor") for line in task.logs)
    assert any("ignores the pipeline's platform settings" in note for note in result.notes)

    # Progress arrives as it happens, in order: started, each printed line, finished.
    kinds = [(e.kind, e.task) for e in events if e.task == "print-inputs"]
    assert kinds[0] == ("task-started", "print-inputs") and kinds[-1] == ("task-finished", "print-inputs")
    assert [e.text for e in events if e.kind == "task-log"][:2] == ["input message='hello kfp'", "input workers=3"]
    assert events[-1].kind == "pipeline-finished" and events[-1].state == TaskState.SUCCEEDED
    assert Path(result.location).is_dir()


def _failing_pipeline(path: Path) -> Path:
    from kfp import compiler, dsl

    @dsl.component(base_image="python:3.11")
    def refuse(value: int) -> int:
        raise ValueError(f"refusing value {value}")

    @dsl.component(base_image="python:3.11")
    def after_it(value: int) -> int:
        return value

    @dsl.pipeline(name="fails-on-purpose")
    def fails(value: int = 42):
        after_it(value=refuse(value=value).output)

    compiler.Compiler().compile(fails, str(path))
    return path


async def test_a_failing_task_is_reported_with_its_error_and_stops_the_run(tmp_path):
    compiled = load_compiled(_failing_pipeline(tmp_path / "fails.yaml"))
    result = await run_local(Settings(home=tmp_path), compiled, {"value": 7})

    assert result.state == TaskState.FAILED
    assert result.task("refuse").state == TaskState.FAILED
    assert result.task("refuse").error == "ValueError: refusing value 7"
    assert result.task("after-it").state == TaskState.SKIPPED
    assert "refuse" in result.error and "refusing value 7" in result.error
