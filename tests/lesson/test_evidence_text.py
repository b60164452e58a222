"""Evidence reads as text, never as Python reprs: step 11's verify spells the declared requests,
limits, node selector and volumes as "key: value", and the step card respells evidence saved
before it did."""

from __future__ import annotations

import time
from types import SimpleNamespace

from backend.cluster import Capabilities
from backend.lesson.definition_steps import verify_platform_settings
from backend.lesson.engine import Lesson
from backend.lesson.evidence import readable, respelled
from backend.models import Checkpoint, Evidence, JobPhase
from backend.pipelines.results import PipelineRunResult, TaskOutcome, TaskState
from backend.pipelines.runs import committed_file


class Cluster:
    """What step 11's verify asks the platform, answered as a finished run would."""

    capabilities = Capabilities(description="a cluster", record="a cluster", pods_here=True)

    async def get_job(self, name):
        return SimpleNamespace(phase=JobPhase.COMPLETE, volumes=["lesson-vol", "scratch"])

    async def list_pods(self, name):
        return [object(), object()]

    async def checkpoints(self, volume):
        return [Checkpoint(volume=volume, path="r/ckpt-step-000005.pt", run="r", step=5, world_size=2,
                           size_bytes=10, valid=True)]


async def test_step_11s_evidence_spells_its_settings_as_text(settings):
    lesson = Lesson(None, settings)
    ctx = lesson._context(lesson.step("11"))
    ctx.cluster = Cluster()
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    (ctx.run_dir / "pipeline-run.json").write_text(PipelineRunResult(
        pipeline="train", backend="local", file=str(committed_file(settings)), run_id="run-1",
        state=TaskState.SUCCEEDED, started=time.time(), tasks=[
            TaskOutcome(name="create-volume", state=TaskState.SUCCEEDED, outputs={"name": "lesson-vol"}),
            TaskOutcome(name="train-job", state=TaskState.SUCCEEDED, outputs={"job": "train-1", "run": "r"}),
        ]).model_dump_json())

    evidence = await verify_platform_settings(ctx)

    assert evidence.ok, evidence
    text = "\n".join([evidence.seen, *evidence.details])
    assert "{" not in text and "['" not in text, text
    assert "requests (cpu: 500m, memory: 512Mi)" in evidence.seen
    assert "node selector kubernetes.io/os: linux" in evidence.seen
    assert ("worker requests (cpu: 500m, memory: 512Mi), limits (cpu: 1, memory: 2Gi), "
            "node selector kubernetes.io/os: linux") in evidence.details[0]
    assert "volumes lesson-vol, scratch" in evidence.details[1]
    # The embedded scheduler enforces requests and selectors (controllers/scheduler.py: a pod
    # that fits no node waits with "0/N nodes are available"): the evidence must not deny it.
    assert "not enforced" not in text
    assert "scheduler placed the workers by the declared requests and node selector" in evidence.details[-1]


def test_values_and_saved_reprs_read_as_key_value_text():
    assert readable({"cpu": "500m", "memory": "1Gi"}) == "cpu: 500m, memory: 1Gi"
    assert readable({"requests": {"cpu": "1"}, "size_bytes": 3 * 2**20, "wall_seconds": 12.54,
                     "volumes": [], "note": None}) == (
        "requests (cpu: 1), size_bytes: 3.0 MiB, wall_seconds: 12.5 s, volumes: none, note: none")
    saved = "definition p.yaml: worker requests {'cpu': '500m', 'memory': '512Mi'}, volumes ['ckpt']"
    assert respelled(saved) == "definition p.yaml: worker requests (cpu: 500m, memory: 512Mi), volumes ckpt"
    for text in ("[print-inputs] input workers=2", "a {brace} here", "step=3 loss=0.5"):
        assert respelled(text) == text  # not a literal: as it was


def test_the_step_card_shows_saved_evidence_without_reprs():
    from tui.widgets.step_view import evidence_content

    evidence = Evidence(ok=True, checked="c", seen="requests {'cpu': '500m'} declared",
                        details=["node selector {'kubernetes.io/os': 'linux'}"], at=None)
    shown = evidence_content(evidence, time.time()).plain
    assert "requests cpu: 500m declared" in shown and "node selector kubernetes.io/os: linux" in shown
