"""The pipelines on a real cluster's Pipelines endpoint (opt-in, like tests/e2e).

    KFCOCKPIT_E2E_CONTEXT=kind-kind KFCOCKPIT_E2E_KFP_HOST=http://localhost:8080 \\
        .venv/bin/python -m pytest -m e2e tests/pipelines

Needs the cluster README describes (Trainer, Pipelines, csi-hostpath snapshots, kfcockpit-base
loaded), the kfcockpit-torch runtime and RBAC for pipeline-runner in the `kubeflow` namespace, and
a port-forward to the Pipelines UI. Skipped without both variables.
"""

from __future__ import annotations

import os

import pytest

from backend.pipelines.results import TaskState
from backend.pipelines.runs import run_lesson_pipeline, run_print_pipeline
from backend.settings import Settings

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (os.environ.get("KFCOCKPIT_E2E_CONTEXT") and os.environ.get("KFCOCKPIT_E2E_KFP_HOST")),
                       reason="set KFCOCKPIT_E2E_CONTEXT and KFCOCKPIT_E2E_KFP_HOST to run against a cluster"),
]


def settings() -> Settings:
    return Settings(backend="kube", context=os.environ["KFCOCKPIT_E2E_CONTEXT"],
                    kfp_host=os.environ["KFCOCKPIT_E2E_KFP_HOST"])


async def test_the_print_pipeline_succeeds_and_its_pod_log_holds_the_inputs():
    result = await run_print_pipeline(settings(), message="hello cluster", workers=2)
    assert result.ok, result.error
    task = result.task("print-inputs")
    assert task.pod and "input message='hello cluster'" in task.logs


async def test_the_committed_pipeline_reproduces_with_two_workers_and_a_checkpoint():
    result = await run_lesson_pipeline(settings(), {"steps": 10, "ckpt_every": 5, "ray_steps": 6})
    assert result.ok, result.error
    assert all(t.state == TaskState.SUCCEEDED for t in result.tasks), result.tasks
    assert result.task("train-job").outputs["world_size"] == 2
    assert result.task("list-checkpoints").outputs["valid"] >= 1
    assert result.task("createpvc").outputs["name"].endswith("-checkpoints")
