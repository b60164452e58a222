"""A task's log as the cockpit shows it, from a pod log in the shape KFP's launcher writes."""

from __future__ import annotations

from backend.pipelines.task_log import TaskLogFilter, outputs_line

POD_LOG = """\
I1129 15:10:09.123456      22 launcher_v2.go:90] input ComponentSpec:{"executorLabel": "exec-train-job"}
I1129 15:10:09.200001      22 cache.go:139] Cannot detect ml-pipeline in the same namespace
[KFP Executor 2026-11-29 15:10:09,123 INFO]: Looking for component `train_job` in --component_module_path
[KFP Executor 2026-11-29 15:10:09,124 INFO]: Got executor_input:
{
    "inputs": {
        "parameterValues": {"num_nodes": 2}
    }
}
trainjob/pipeline-ddp-2w-abc123 created

[pipeline-ddp-2w-abc123-node-0-0-x1] step=1 loss=0.780873 rank=0 world=2
%s
[KFP Executor 2026-11-29 15:10:19,125 INFO]: Wrote executor output file to /tmp/outputs/executor_output.json.
I1129 15:10:19.500000      22 launcher_v2.go:180] publish success.

""" % outputs_line({"job": "pipeline-ddp-2w-abc123", "world_size": 2, "volume": "v-checkpoints"})


def test_a_pod_log_keeps_what_the_task_printed_and_its_reported_outputs():
    shown = TaskLogFilter()
    lines = shown.feed_all(POD_LOG.splitlines())
    assert lines == ["trainjob/pipeline-ddp-2w-abc123 created", "",
                     "[pipeline-ddp-2w-abc123-node-0-0-x1] step=1 loss=0.780873 rank=0 world=2"]
    assert shown.outputs == {"job": "pipeline-ddp-2w-abc123", "world_size": 2, "volume": "v-checkpoints"}
