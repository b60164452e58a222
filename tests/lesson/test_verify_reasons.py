"""Verifies that fail, and say why, when the evidence is not there: a real TrainJob that finished
without anyone killing a worker, a step 7 whose snapshots are gone. (A real pipeline run whose
kept log lacks an input: tests/lesson/test_lesson_in_cockpit.py, on its run of step 1.)"""

from __future__ import annotations

import json

import pytest

from backend.lesson.engine import Lesson
from backend.lesson.jobs import JobRecord, apply_runtime_and_volume, lesson_trainjob
from backend.models import JobPhase
from tests.lesson.conftest import kfcockpit


@pytest.fixture
def local_cluster(settings):
    from backend.connect import connect

    cluster = connect(settings)
    yield cluster
    result = kfcockpit("cluster", "down", home=settings.home)
    assert result.code == 0, result.err


async def test_step_6_fails_when_no_worker_was_killed(settings, local_cluster):
    await apply_runtime_and_volume(local_cluster)
    await local_cluster.apply(lesson_trainjob("lesson-untouched", 2, steps=12, step_delay=0.0))
    job = await local_cluster.wait_job("lesson-untouched", frozenset({JobPhase.COMPLETE}), 300)
    assert job.phase is JobPhase.COMPLETE
    lesson = Lesson(local_cluster, settings)
    JobRecord(jobs=["lesson-untouched"]).save(lesson._context(lesson.step("6")))
    evidence = await lesson.verify("6")
    assert not evidence.ok
    assert evidence.seen == ("the worker group never restarted (restart attempt 0): no worker was "
                             "killed before the job finished")
    assert "TrainJob lesson-untouched: Complete, restart attempt 0" in evidence.details[0]


async def test_step_7_without_snapshots_says_which_is_missing(settings, local_cluster):
    lesson = Lesson(local_cluster, settings)
    run_dir = settings.workspace / "runs" / "step-7"
    run_dir.mkdir(parents=True)
    (run_dir / "runs.json").write_text(json.dumps([
        {"job": "lesson-scale-1w-gone", "workers": 1, "snapshot": "lesson-scale-1w-gone"}]))
    evidence = await lesson.verify("7")
    assert not evidence.ok
    assert evidence.seen == ("snapshot lesson-scale-1w-gone of the 1-worker run does not exist "
                             "(deleted?); run step 7 again")


def test_step_7_takes_two_snapshots_made_by_hand():
    """No `lesson run 7`: snapshots taken with kfcockpit or kubectl, after a 1- and a 2-worker run."""
    from backend.lesson.scaling_step import runs_in_snapshots
    from backend.models import RunMetrics, Snapshot

    def metrics(run: str, workers: int) -> RunMetrics:
        return RunMetrics(run=run, final_loss=0.1, steps=40, world_size=workers, wall_seconds=9.0)

    # The volume keeps every run: an older two-worker run is in both, the new one only in the later.
    one = Snapshot(name="after-one", volume="checkpoints", created=100.0,
                   metrics=[metrics("older", 2), metrics("one", 1)])
    both = Snapshot(name="after-two", volume="checkpoints", created=200.0,
                    metrics=[metrics("older", 2), metrics("one", 1), metrics("two", 2)])
    pending = Snapshot(name="later", volume="checkpoints", created=300.0, ready=False,
                       metrics=[metrics("three", 1)])
    assert runs_in_snapshots([pending, one, both]) == [
        {"job": "one", "workers": 1, "snapshot": "after-one"}, {"job": "two", "workers": 2, "snapshot": "after-two"}]
    assert runs_in_snapshots([both]) == []  # one snapshot is not two
    assert runs_in_snapshots([one, Snapshot(name="ray", volume="checkpoints", created=150.0, metrics=[
        metrics("ray", 2).model_copy(update={"launcher": "ray"})])]) == []


async def test_a_pipeline_run_past_its_time_is_stopped_with_its_tasks(settings):
    from backend.cluster import ClusterError
    from backend.lesson.pipeline_runs import run_pipeline
    from backend.pipelines.runs import run_print_pipeline
    from tests.lesson.conftest import processes_under

    lesson = Lesson(None, settings)
    ctx = lesson._context(lesson.step("1"))
    with pytest.raises(ClusterError, match=r"^the pipeline run did not finish within 0 s and was stopped"):
        async for _ in run_pipeline(ctx, lambda on_event: run_print_pipeline(settings, on_event=on_event),
                                    timeout=0.01):
            pass
    assert not (ctx.run_dir / "pipeline-run.json").exists()
    assert processes_under(settings.home) == []


async def test_step_6_in_the_cockpit_is_done_at_the_resume_not_at_the_paced_jobs_end(settings):
    """Its done-when is the resume: the cockpit's run ends once the new group trained a step
    after loading its checkpoint (it stayed ◐ ~50 s more, waiting for all 300 steps)."""
    from types import SimpleNamespace

    from backend.lesson.engine import Lesson
    from backend.lesson.resume_step import run_kill_and_resume
    from backend.models import LogLine, PodPhase

    def lines(pod: str, rank: int, *texts: str) -> list[LogLine]:
        return [LogLine.parsed(pod, rank, 1.0, text) for text in texts]

    class Cluster:
        waited = False

        async def apply(self, resource):
            return f"applied {resource.kind}"

        async def list_pods(self, job):
            return [SimpleNamespace(name=f"{job}-node-0-1-aaaaa", phase=PodPhase.RUNNING)]

        async def stream_logs(self, job, follow=True):
            old, new = f"{job}-node-0-0-aaaaa", f"{job}-node-0-0-bbbbb"
            yield lines(old, 0, "event=checkpoint_saved step=5 reason=periodic file=f bytes=1 rank=0",
                        "step=6 loss=0.5 rank=0 world=2")
            yield lines(new, 0, "event=start rank=0 world=2 pid=1 steps=300 restart=1",
                        "event=resumed from_step=5 rank=0 world=2", "step=6 loss=0.5 rank=0 world=2")
            raise AssertionError("followed past the resume")

        async def wait_job(self, *args, **kwargs):
            Cluster.waited = True
            raise AssertionError("waited for the paced job's end")

    lesson = Lesson(None, settings)
    ctx = lesson._context(lesson.step("6"))
    ctx.cluster, ctx.interactive = Cluster(), True
    said = [getattr(update, "text", str(update)) async for update in run_kill_and_resume(ctx)]
    assert any("resumed from step 5" in text for text in said), said
    assert "after the resume: done" in said[-1] and not Cluster.waited, said
