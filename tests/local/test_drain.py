"""kubectl cordon, drain and uncordon on the embedded cluster (the real kubectl), as upstream:

- cordon sets spec.unschedulable; the node lifecycle controller taints it
  node.kubernetes.io/unschedulable:NoSchedule (TaintNodesByCondition) and the scheduler's
  NodeUnschedulable filter keeps new pods off it ("node(s) were unschedulable");
- drain evicts the node's pods through pods/eviction (kubernetes pkg/registry/core/pod/storage/
  eviction.go), which honours a PodDisruptionBudget: a budget with no disruption allowed answers
  429 "Cannot evict pod as it would violate the pod's disruption budget." and kubectl keeps
  retrying until its --timeout; without it the pods go, the Job fails and JobSet v0.12's failure
  policy recreates the group on the node left, which resumes from its checkpoints and completes;
- uncordon makes the node schedulable again, its taint gone."""

from __future__ import annotations

import json

from backend.models import JobPhase, PodPhase
from tests.local.conftest import WAIT, apply_all, kubectl, lesson_job, lesson_resources, wait_for_pods

COMPLETE = frozenset({JobPhase.COMPLETE})


def _budget(home, tmp_path, min_available: int) -> None:
    manifest = tmp_path / "pdb.json"
    manifest.write_text(json.dumps({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "workers"},
        "spec": {"minAvailable": min_available,
                 "selector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "drained"}}}}))
    applied = kubectl(home, "apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr


async def test_drain_evicts_through_the_budget_and_the_job_goes_on_elsewhere(cluster, home, tmp_path):
    await apply_all(cluster, *lesson_resources())
    await cluster.apply(lesson_job("drained", ckpt_dir="/checkpoints/drained", steps=400, step_delay=0.05))
    running = await wait_for_pods(cluster, "drained", lambda pods: len(pods) == 2 and all(
        p.phase == PodPhase.RUNNING for p in pods.values()))
    node = running[1].node
    _budget(home, tmp_path, 2)
    healthy = kubectl(home, "wait", "pdb/workers", "--for=jsonpath={.status.currentHealthy}=2", "--timeout=60s")
    assert healthy.returncode == 0, healthy.stderr

    refused = kubectl(home, "drain", node, "--ignore-daemonsets", "--timeout=8s")  # one try and a retry 5 s on
    assert refused.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in refused.stderr, refused.stderr
    spec = json.loads(kubectl(home, "get", "node", node, "-o", "json").stdout)["spec"]
    assert spec["unschedulable"] is True  # drain cordons first
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in [(t["key"], t["effect"]) for t in spec["taints"]]
    assert [p.phase for p in await cluster.list_pods("drained")] == [PodPhase.RUNNING] * 2  # nothing evicted

    assert kubectl(home, "delete", "pdb", "workers").returncode == 0
    drained = kubectl(home, "drain", node, "--ignore-daemonsets", "--timeout=120s")
    assert drained.returncode == 0, drained.stderr
    assert f"node/{node} drained" in drained.stdout
    job = await cluster.wait_job("drained", COMPLETE, WAIT)
    assert job.restart_attempt >= 1
    assert all(p.node != node and p.phase == PodPhase.SUCCEEDED for p in await cluster.list_pods("drained"))

    taints = json.loads(kubectl(home, "get", "node", node, "-o", "json").stdout)["spec"].get("taints") or []
    assert [(t["key"], t["effect"]) for t in taints] == [("node.kubernetes.io/unschedulable", "NoSchedule")]
    assert kubectl(home, "uncordon", node).returncode == 0
    assert "unschedulable" not in json.loads(kubectl(home, "get", "node", node, "-o", "json").stdout)["spec"]
