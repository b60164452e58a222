"""The lesson's pipelines end to end through the one client path, on a real cluster's Pipelines
endpoint:

    KFCOCKPIT_E2E_CONTEXT=kind-kind KFCOCKPIT_E2E_KFP_HOST=http://localhost:8080 make test-e2e

On the embedded cluster (`make test`) the lesson walk runs both pipelines, as steps 1 and 12 (the
committed file, on a clean cluster), and checks what this module checks on their runs
(tests/lesson/test_lesson_in_cockpit.py): one run of each, not two.

A real cluster needs what README describes (Trainer, Pipelines, csi-hostpath snapshots,
kfcockpit-base loaded), the kfcockpit-torch runtime, RBAC for pipeline-runner in the `kubeflow`
namespace, and a port-forward to the Pipelines UI.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from backend.models import PodPhase, parse_manifests
from backend.pipelines.images import BASE_IMAGE
from backend.project import MANIFESTS
from backend.pipelines.results import TaskState
from backend.pipelines.runs import run_lesson_pipeline, run_print_pipeline
from backend.settings import Settings

CONTEXT = os.environ.get("KFCOCKPIT_E2E_CONTEXT")
KFP_HOST = os.environ.get("KFCOCKPIT_E2E_KFP_HOST")
ON_CLUSTER = bool(CONTEXT and KFP_HOST)
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not ON_CLUSTER, reason="the embedded cluster's runs of these pipelines are the lesson walk's steps 1 and 12 "
                           "(tests/lesson/test_lesson_in_cockpit.py)")]


@pytest.fixture(scope="module")
def settings():
    return Settings(backend="kube", context=CONTEXT, kfp_host=KFP_HOST)


async def test_the_print_pipeline_succeeds_and_its_log_holds_the_inputs(settings):
    result = await run_print_pipeline(settings, message="hello cluster", workers=2)
    assert result.ok, result.error
    task = result.task("print-inputs")
    assert "input message='hello cluster'" in task.logs
    assert task.pod  # it ran as a pod of the cluster


async def test_the_committed_pipeline_trains_two_workers_and_leaves_checkpoints(settings):
    """The committed pipeline: a real two-worker TrainJob submitted from a task, checkpoints on
    the pipeline's volume, two snapshots compared, and the Ray Train task with two workers."""
    from backend.connect import connect

    cluster = await asyncio.to_thread(connect, settings)
    try:
        for runtime in parse_manifests((MANIFESTS / "runtime.yaml").read_text()):
            await cluster.apply(runtime)  # the platform's part, as on a cluster with Trainer installed
        seen = []
        result = await run_lesson_pipeline(settings, {"steps": 10, "ckpt_every": 5, "ray_steps": 6},
                                           on_event=seen.append)
        assert result.ok, result.error
        assert all(task.state == TaskState.SUCCEEDED for task in result.tasks), result.tasks

        # The TrainJob the task submitted: two worker pods on the pinned image, both finished.
        train = result.task("train-job").outputs
        assert train["world_size"] == 2 and train["run"] == "ddp-2w"
        pods = await cluster.list_pods(train["job"])
        assert sorted(p.rank for p in pods) == [0, 1]
        assert all(p.phase == PodPhase.SUCCEEDED and p.image == BASE_IMAGE for p in pods)
        job = await cluster.get_job(train["job"])
        assert job.num_nodes == 2

        # Its checkpoints are on the pipeline's volume, read back by a reader pod (not the workers).
        volume = result.task("createpvc").outputs["name"]
        assert volume.endswith("-checkpoints")
        checkpoints = [c for c in await cluster.checkpoints(volume) if c.run == "ddp-2w"]
        assert [c.step for c in checkpoints if c.valid] == [5, 10]
        assert all(c.world_size == 2 for c in checkpoints)
        assert result.task("list-checkpoints").outputs["newest_step"] >= 10

        # Two snapshots, compared side by side: the two-worker and the one-worker run.
        snapshots = {s.name for s in await cluster.snapshots()}
        first, second = result.output("snapshot-volume"), result.output("snapshot-volume-2")
        assert {first, second} <= snapshots
        rows = json.loads(result.output("compare-runs"))
        assert [(r["run"], r["world_size"], r["snapshot"]) for r in rows] == [
            ("ddp-2w", 2, first), ("ddp-1w", 1, second)]

        # Ray Train in its task: two workers, each reporting its metrics.
        ray = result.task("ray-train")
        assert ray.outputs["world_size"] == 2
        reported = {line.split("rank=")[1].split()[0] for line in ray.logs
                    if line.startswith("event=reported") and "rank=" in line}
        assert reported == {"0", "1"}

        # Progress arrived while the run went on: the workers' lines inside the train task's stream.
        train_lines = [e.text for e in seen if e.kind == "task-log" and e.task == "train-job"]
        assert any("step=10 loss=" in line and "rank=1" in line for line in train_lines)
    finally:
        await cluster.close()
