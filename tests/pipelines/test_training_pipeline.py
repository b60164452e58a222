"""The committed pipeline, reproduced end to end on the embedded cluster with kfp.local: a real
two-worker TrainJob submitted from a task, checkpoints on the pipeline's volume, two snapshots
compared, and the Ray Train task with two workers. One run (it takes about a minute)."""

from __future__ import annotations

import json

from backend.models import PodPhase, parse_manifests
from backend.pipelines.compiled import COMPILED_FILES
from backend.pipelines.images import BASE_IMAGE, MANIFESTS
from backend.pipelines.results import TaskState
from backend.pipelines.runs import run_lesson_pipeline
from backend.settings import Settings


async def test_the_committed_pipeline_trains_two_workers_and_leaves_checkpoints(cluster, home):
    for runtime in parse_manifests((MANIFESTS / "runtime.yaml").read_text()):
        await cluster.apply(runtime)  # the platform's part, as on a cluster with Trainer installed

    seen = []
    result = await run_lesson_pipeline(Settings(home=home), {"steps": 10, "ckpt_every": 5, "ray_steps": 6},
                                       on_event=seen.append)

    assert result.ok, result.error
    assert result.file == str(COMPILED_FILES["local"])
    assert all(task.state == TaskState.SUCCEEDED for task in result.tasks), result.tasks

    # The TrainJob the task submitted: two worker pods on the pinned image, both finished.
    train = result.task("train-job").outputs
    assert train["world_size"] == 2 and train["run"] == "ddp-2w"
    pods = await cluster.list_pods(train["job"])
    assert sorted(p.rank for p in pods) == [0, 1]
    assert all(p.phase == PodPhase.SUCCEEDED and p.image == BASE_IMAGE for p in pods)
    assert (await cluster.get_job(train["job"])).num_nodes == 2

    # Its checkpoints are on the pipeline's volume, read back by this process (not the workers).
    volume = result.task("create-volume").outputs["name"]
    checkpoints = [c for c in await cluster.checkpoints(volume) if c.run == "ddp-2w"]
    assert [c.step for c in checkpoints if c.valid] == [5, 10]
    assert all(c.world_size == 2 for c in checkpoints)
    assert result.task("list-checkpoints").outputs["newest_step"] >= 10

    # Two snapshots, compared side by side: the two-worker and the one-worker run.
    snapshots = {s.name for s in await cluster.snapshots()}
    first, second = result.output("snapshot-volume"), result.output("snapshot-volume-2")
    assert {first, second} <= snapshots
    rows = json.loads(result.output("compare-runs"))
    assert [(r["run"], r["world_size"], r["snapshot"]) for r in rows] == [("ddp-2w", 2, first), ("ddp-1w", 1, second)]

    # Ray Train in its task: two workers, each reporting its metrics.
    ray = result.task("ray-train")
    assert ray.outputs["world_size"] == 2
    reported = {line.split("rank=")[1].split()[0] for line in ray.logs
                if line.startswith("event=reported") and "rank=" in line}
    assert reported == {"0", "1"}

    # Progress arrived while the run went on: the workers' lines inside the train task's stream.
    train_lines = [e.text for e in seen if e.kind == "task-log" and e.task == "train-job"]
    assert any("step=10 loss=" in line and "rank=1" in line for line in train_lines)
