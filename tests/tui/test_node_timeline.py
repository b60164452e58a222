"""The failure timeline's model with the cluster's nodes and Events (tui/model/node_timeline.py), fed as
the screen feeds it: what happened to the nodes a group ran on, and the Events about its pods and
its JobSet, join that group's restart; what happened elsewhere does not. The real node failure,
end to end, is tests/local/test_node_failure.py."""

from __future__ import annotations

from backend.models import ClusterEvent, NodeSummary, PodPhase, Taint
from tests.tui.test_timeline import ev
from tui.model.timeline import FailureTimeline

UNREACHABLE = Taint(key="node.kubernetes.io/unreachable", effect="NoExecute", added=108.0)


def ready(name: str, **changes) -> NodeSummary:
    return NodeSummary(name=name, ready="True", ready_reason="KubeletReady", ready_since=50.0).model_copy(
        update=changes)


def lost(name: str, since: float, tainted: bool = True) -> NodeSummary:
    return ready(name, ready="Unknown", ready_reason="NodeStatusUnknown", ready_since=since,
                 ready_message="Kubelet stopped posting node status.", taints=[UNREACHABLE] if tainted else [])


def group(t: FailureTimeline, attempt: int, created: float, nodes: tuple[str, str]) -> None:
    for rank, node in enumerate(nodes):
        t.pod_event(ev("ADDED", f"j-{attempt}-{rank}", rank, attempt, PodPhase.RUNNING, created=created,
                       started=created + 1, node=node), created + 1)


def test_a_node_that_went_before_any_pod_was_seen_to_fail_is_the_restarts_first_sign():
    t = FailureTimeline("j")
    for node in ("w1", "w2"):
        t.node_seen(ready(node), 60.0)
    group(t, 0, 100.0, ("w1", "w2"))
    # no heartbeat: Ready Unknown, then tainted (whole-second stamps, timed by when they were seen)
    t.node_seen(lost("w2", since=107.0, tainted=False), 107.4)
    t.node_seen(lost("w2", since=107.0), 108.4)
    # the Job deletes the failed group's pods (the one on the lost node stays Terminating), its
    # Event stamped the second the node's condition changed in, and seen late: told from then on
    t.event_seen(ClusterEvent(reason="SuccessfulDelete", kind="Job", name="j-node-0", first=107.0,
                              message="Deleted pod: j-0-1"), 109.2)
    t.event_seen(ClusterEvent(reason="SuccessfulDelete", kind="Job", name="k-node-0", first=109.0,
                              message="Deleted pod: k-0-1"), 109.2)
    t.event_seen(ClusterEvent(reason="KueueForcefullyDeleted", kind="Pod", name="j-0-1", first=112.0,
                              message="Pod forcefully terminated after 1s grace period"), 112.2)
    t.event_seen(ClusterEvent(reason="KueueForcefullyDeleted", kind="Pod", name="other-job-pod", first=112.0), 112.2)
    t.event_seen(ClusterEvent(reason="RestartJobSetFailurePolicyAction", kind="JobSet", name="j", first=112.0), 112.2)
    t.event_seen(ClusterEvent(reason="RestartJobSetFailurePolicyAction", kind="JobSet", name="k", first=112.0), 112.2)
    t.pod_event(ev("DELETED", "j-0-1", 1, 0, PodPhase.RUNNING, created=100.0, node="w2"), 112.3)
    group(t, 1, 112.5, ("w1", "w1"))
    [restart] = t.restarts()
    assert restart.node == "w2" and restart.failed_at == 107.4  # the node's own condition, not the pod's end
    told = [(round(m.at - restart.failed_at, 1), m.what) for m in restart.moments]
    assert told[:4] == [
        (0.0, "node w2 failed (rank 1 ran there)"),
        (0.0, "node w2 Ready Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)"),
        (0.0, "Job deleted pod 0-1 (SuccessfulDelete)"),
        (1.0, "node w2 tainted node.kubernetes.io/unreachable:NoExecute")], told
    texts = [what for _, what in told]
    assert not any("k-0-1" in text for text in texts)
    assert "KueueForcefullyDeleted: Pod forcefully terminated after 1s grace period" in texts
    assert texts.count("JobSet restarts the group: RestartJobSetFailurePolicyAction") == 1  # job k's is not j's
    assert "2 new pods running on w1" in texts


def test_a_pod_kill_tells_nothing_of_nodes_the_group_did_not_run_on():
    t = FailureTimeline("j")
    for node in ("w1", "w2", "w3"):
        t.node_seen(ready(node), 60.0)
    group(t, 0, 100.0, ("w1", "w2"))
    t.node_seen(ready("w3", unschedulable=True), 104.0)
    t.node_seen(lost("w3", since=105.0), 105.2)
    t.pod_event(ev("MODIFIED", "j-0-1", 1, 0, PodPhase.FAILED, created=100.0, finished=106.0, reason="Killed",
                   exit_code=137, node="w2"), 106.0)
    group(t, 1, 107.0, ("w1", "w2"))
    [restart] = t.restarts()
    assert restart.node is None and restart.failed_at == 106.0
    assert not any("w3" in m.what for m in restart.moments)
    assert restart.moments[-1].what == "2 new pods running on w1, w2"


async def test_a_cordon_and_an_uncordon_are_told_though_nothing_restarts():
    """`C` in the nodes view cordoned a node and the timeline said nothing: no restart followed."""
    from textual.app import App, ComposeResult

    from tui.widgets.timeline_view import TimelineView

    t = FailureTimeline("j")
    t.node_seen(ready("w1"), 60.0)
    t.node_seen(ready("w1", unschedulable=True), 70.0)
    t.node_seen(ready("w1", unschedulable=False), 90.0)
    assert [(m.at, m.what) for m in t.cordons()] == [(70.0, "node w1 cordoned"), (90.0, "node w1 uncordoned")]

    class Host(App):
        def compose(self) -> ComposeResult:
            yield TimelineView()

    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        view = app.query_one(TimelineView)
        view.model = t
        view.redraw()
        await pilot.pause()
        shown = str(view.query_one("#timeline-nodes").render())
        assert "⊘ node w1 cordoned" in shown and "⊘ node w1 uncordoned" in shown, shown
