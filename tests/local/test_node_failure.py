"""A node lost during a run, on the lesson's cluster (two nodes, the node lifecycle's short timings:
backend/local/shape.py LESSON). What follows is upstream's, in its order:

- kubernetes pkg/controller/nodelifecycle (node_lifecycle_controller.go): no heartbeat for
  --node-monitor-grace-period makes the node's Ready condition Unknown (NodeStatusUnknown) and
  taints it node.kubernetes.io/unreachable (NoExecute and NoSchedule);
- plugin/pkg/admission/defaulttolerationseconds: every pod tolerates that taint for
  --default-unreachable-toleration-seconds, after which pkg/controller/tainteviction deletes it;
- a pod on the lost node stays Terminating (no kubelet confirms its end) until Kueue's
  FailureRecoveryPolicy (KEP-6757) fails and removes it, the lesson's runtime allowing it;
- the surviving rank fails on the lost peer; the Job fails, and JobSet v0.12's failure policy
  (pkg/controllers/failure_policy.go, restart strategy Recreate) recreates the group, whose pods
  the scheduler keeps off the tainted node; they resume from the shared volume's checkpoints.

The run ends bitwise equal to an uninterrupted one, as a killed pod's does (tests/local/test_jobs.py);
`node restore` brings the node back Ready, its taints gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from backend.local.embedded import Embedded
from backend.models import JobPhase, PodPhase
from tests.local.conftest import WAIT, apply_all, kubectl, lesson_job, lesson_resources

COMPLETE = frozenset({JobPhase.COMPLETE})


def _metrics(home, run: str) -> dict:
    return json.loads((Embedded(home).layout.claim_dir("default", "checkpoints") / run / "metrics.json").read_text())


def _node(home, name: str) -> dict:
    return json.loads(kubectl(home, "get", "node", name, "-o", "json").stdout)


async def test_a_lost_node_restarts_the_group_on_the_node_left_and_ends_bitwise_equal(cluster, home):
    embedded = Embedded(home)
    await apply_all(cluster, *lesson_resources())
    plan = dict(steps=40, step_delay=0.05)
    await cluster.apply(lesson_job("straight", ckpt_dir="/checkpoints/straight", **plan))
    await cluster.wait_job("straight", COMPLETE, WAIT)  # uninterrupted: done before any node goes
    await cluster.apply(lesson_job("lost", ckpt_dir="/checkpoints/lost", **plan))

    lines, lost = [], None
    async for batch in cluster.stream_logs("lost"):  # follows the replacement pods, ends with the job
        lines += batch
        if lost is None and any(line.step is not None and line.step >= 12 for line in batch):
            first = await cluster.list_pods("lost")
            assert len({p.node for p in first}) == 2  # one worker per node
            lost = next(p for p in first if p.rank == 1).node
            said = await embedded.fail_node(lost)
            assert said.startswith(f"node {lost} failed")
    assert lost is not None

    job = await cluster.wait_job("lost", COMPLETE, WAIT)
    assert job.phase == JobPhase.COMPLETE and job.restart_attempt >= 1
    pods = await cluster.list_pods("lost")
    assert all(p.phase == PodPhase.SUCCEEDED and p.node != lost for p in pods)

    node = _node(home, lost)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    assert {(t["key"], t["effect"]) for t in node["spec"]["taints"]} == {
        ("node.kubernetes.io/unreachable", "NoExecute"), ("node.kubernetes.io/unreachable", "NoSchedule")}
    events = kubectl(home, "get", "events", "-o", "json")
    reasons = {e["reason"] for e in json.loads(events.stdout)["items"]}
    assert {"NodeNotReady", "KueueForcefullyDeleted"} <= reasons, reasons

    resumed = [line for line in lines if "event=resumed" in line.text]
    assert resumed  # the new group came back from the checkpoints on the shared volume
    straight, restarted = _metrics(home, "straight"), _metrics(home, "lost")
    assert restarted["resumes"] >= 1
    assert restarted["params_sha256"] == straight["params_sha256"]
    assert restarted["loss_history"] == straight["loss_history"]

    said = await embedded.restore_node(lost)
    assert said.startswith(f"node {lost} restored")
    back = kubectl(home, "wait", f"node/{lost}", "--for=condition=Ready", "--timeout=60s")
    assert back.returncode == 0, back.stderr
    assert _untainted(home, lost)


def _untainted(home, name: str) -> bool:
    """Once the node has no taints, following `kubectl get node -w` (one line per change)."""
    watching = subprocess.Popen([str(Path(sys.executable).parent / "kubectl"), "get", "node", name, "-w",
                                 "-o", "jsonpath={.spec.taints}{\"\\n\"}"], stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, KUBECONFIG=str(home / "kubeconfig")))
    try:
        return any(not line.strip() for line in watching.stdout)
    finally:
        watching.kill()
        watching.wait()
