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
`node restore` brings the node back Ready, its taints gone.

The same run, watched as the cockpit watches it (the Cluster protocol's pod, node and Event
watches and the merged logs, fed to the failure timeline's model, tui/model/timeline.py), is narrated
in that order with seconds from the first sign of the failure: the node failed, its Ready
Unknown, the unreachable taint, the Job deleting the lost rank's pod (SuccessfulDelete) and that
pod ended for good (TaintManagerEviction, or KueueForcefullyDeleted once the Job had deleted it),
JobSet's RestartJobSetFailurePolicyAction, the new pods running on the node left, and last the
first step trained again."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

from backend.local.embedded import Embedded
from backend.models import JobPhase, PodPhase
from tests.local.conftest import WAIT, apply_all, cluster_events, kubectl, lesson_job, lesson_resources
from tui.model.timeline import FailureTimeline

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
    async with watched(cluster, "lost") as (model, narrated):
        async for batch in cluster.stream_logs("lost"):  # follows the replacement pods, ends with the job
            lines += batch
            if lost is None and any(line.step is not None and line.step >= 12 for line in batch):
                first = await cluster.list_pods("lost")
                assert len({p.node for p in first}) == 2  # one worker per node
                lost = next(p for p in first if p.rank == 1).node
                left = next(p for p in first if p.rank == 0).node
                said = await embedded.fail_node(lost)
                assert said.startswith(f"node {lost} failed")
        assert lost is not None
        job = await cluster.wait_job("lost", COMPLETE, WAIT)
        try:
            await asyncio.wait_for(narrated(lambda: _told(model)), WAIT)
        except TimeoutError:
            told = [f"attempt {r.attempt}: " + "; ".join(m.what for m in r.moments) for r in model.restarts()]
            raise AssertionError("\n".join(["the timeline never told the node's loss:", *told, "events:",
                                             *cluster_events(home)])) from None
    _narrates_the_node_failure(model, lost, left)

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


UNREACHABLE = "tainted node.kubernetes.io/unreachable:NoExecute"
ENDED = ("TaintManagerEviction", "KueueForcefullyDeleted")


@asynccontextmanager
async def watched(cluster, job: str):
    """The failure timeline's model fed as the cockpit feeds it, and a wait for it to tell something."""
    model = FailureTimeline(job)
    changed = asyncio.Event()

    async def feed(stream, take) -> None:
        async for item in stream:
            take(item)
            changed.set()

    async def narrated(predicate) -> None:
        while not predicate():
            changed.clear()
            await changed.wait()

    feeds = [asyncio.create_task(feed(cluster.watch_pods(job), lambda e: model.pod_event(e, time.time()))),
             asyncio.create_task(feed(cluster.watch_nodes(), lambda e: model.node_seen(e.node, time.time()))),
             asyncio.create_task(feed(cluster.watch_events(), lambda e: model.event_seen(e, time.time()))),
             asyncio.create_task(feed(cluster.stream_logs(job), model.add_lines))]
    try:
        yield model, narrated
    finally:
        for task in feeds:
            task.cancel()
        await asyncio.gather(*feeds, return_exceptions=True)


def _told(model: FailureTimeline) -> bool:
    restarts = model.restarts()
    return bool(restarts) and restarts[0].recovered and any(UNREACHABLE in m.what for m in restarts[0].moments) \
        and any(reason in m.what for m in restarts[0].moments for reason in ENDED)


def _narrates_the_node_failure(model: FailureTimeline, lost: str, left: str) -> None:
    restart = model.restarts()[0]
    moments = restart.moments
    shown = "\n".join(f"{m.at - restart.failed_at:+6.1f} s {m.what}" for m in moments)

    def index(text: str) -> int:
        found = [i for i, m in enumerate(moments) if text in m.what]
        assert found, f"{text!r} not told:\n{shown}"
        return found[0]

    assert restart.node == lost, shown
    assert moments[0].what == f"node {lost} failed (rank 1 ran there)" and moments[0].at == restart.failed_at, shown
    assert all(m.at >= restart.failed_at for m in moments), shown  # seconds from the first sign
    deleted = index("Job deleted pod 1-")  # the Job controller's, the failed Job's other pod
    not_ready = index(f"node {lost} Ready Unknown (NodeStatusUnknown")
    tainted = index(f"node {lost} {UNREACHABLE}")
    ended = min(i for i, m in enumerate(moments) if any(reason in m.what for reason in ENDED))
    restarted = index("JobSet restarts the group: RestartJobSetFailurePolicyAction")
    running = index(f"new pods running on {left.removeprefix('kfcockpit-')}")
    stepped = index("first step trained again")
    assert not_ready < tainted < ended and deleted < ended, shown  # the grace period, the taint, the pod gone
    assert restarted < running < stepped == len(moments) - 1, shown
    assert moments[not_ready].at - restart.failed_at < 30, shown  # the lesson's 4 s grace, not upstream's 50 s


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
