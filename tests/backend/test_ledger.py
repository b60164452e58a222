"""The attempt ledger's rules (backend/ledger/rows.py) on the Events and pods the platform keeps
after three restarts of a two-rank group: one pod deleted, one node lost, one rank OOMKilled (its
pod still listed), each attempt with its reason; the JobSet's count against its budget.
Event reasons as upstream records them: the Job controller's SuccessfulCreate ("Created pod: X")
and SuccessfulDelete ("Deleted pod: X", kubernetes pkg/controller/job/job_controller.go), the
scheduler's Scheduled ("Successfully assigned ns/X to NODE"), the kubelet's Killing, the node
lifecycle controller's NodeNotReady and the taint manager's TaintManagerEviction."""

from __future__ import annotations

from backend.ledger.rows import FirstGroup, build_ledger, exit_text
from backend.models import ClusterEvent, JobPhase, JobSummary, Pod, PodPhase

T0 = 1_700_000_000.0
JOB = "lj"


def created(pod: str, at: float, node: str) -> list[ClusterEvent]:
    return [ClusterEvent(reason="SuccessfulCreate", message=f"Created pod: {pod}", kind="Job", name=f"{JOB}-node-0",
                         first=at),
            ClusterEvent(reason="Scheduled", message=f"Successfully assigned default/{pod} to {node}", kind="Pod",
                         name=pod, first=at)]


def pod_event(reason: str, pod: str, at: float, message: str = "") -> ClusterEvent:
    return ClusterEvent(reason=reason, message=message, kind="Pod", name=pod, first=at)


def job_deleted(pod: str, at: float) -> ClusterEvent:
    return ClusterEvent(reason="SuccessfulDelete", message=f"Deleted pod: {pod}", kind="Job", name=f"{JOB}-node-0",
                        first=at)


def three_restarts():
    events = []
    # attempt 0: rank 1's pod deleted (kubectl delete); the Job deletes rank 0's
    events += created(f"{JOB}-node-0-0-aaaaa", T0, "w1") + created(f"{JOB}-node-0-1-bbbbb", T0, "w2")
    events += [pod_event("Killing", f"{JOB}-node-0-1-bbbbb", T0 + 20), job_deleted(f"{JOB}-node-0-0-aaaaa", T0 + 20),
               pod_event("Killing", f"{JOB}-node-0-0-aaaaa", T0 + 20)]
    # attempt 1: node w2 lost; its pod evicted by the taint manager
    events += created(f"{JOB}-node-0-0-ccccc", T0 + 22, "w1") + created(f"{JOB}-node-0-1-ddddd", T0 + 22, "w2")
    events += [ClusterEvent(reason="NodeNotReady", kind="Node", name="w2", first=T0 + 40),
               pod_event("TaintManagerEviction", f"{JOB}-node-0-1-ddddd", T0 + 45, "Marking for deletion")]
    # attempt 2: rank 0 OOMKilled; then attempt 3 runs, its pods listed with the failed one's
    events += created(f"{JOB}-node-0-0-eeeee", T0 + 50, "w1") + created(f"{JOB}-node-0-1-fffff", T0 + 50, "w3")
    events += created(f"{JOB}-node-0-0-ggggg", T0 + 80, "w1") + created(f"{JOB}-node-0-1-hhhhh", T0 + 80, "w3")
    pods = [Pod(name=f"{JOB}-node-0-0-ggggg", job=JOB, rank=0, restart_attempt=3, phase=PodPhase.RUNNING,
                node="w1", created=T0 + 80),
            Pod(name=f"{JOB}-node-0-1-hhhhh", job=JOB, rank=1, restart_attempt=3, phase=PodPhase.RUNNING,
                node="w3", created=T0 + 80),
            Pod(name=f"{JOB}-node-0-0-eeeee", job=JOB, rank=0, restart_attempt=2, phase=PodPhase.FAILED,
                node="w1", created=T0 + 50, finished=T0 + 70, exit_code=137, reason="OOMKilled")]
    summary = JobSummary(name=JOB, phase=JobPhase.RUNNING, num_nodes=2, restart_attempt=3, max_restarts=5,
                         created=T0)
    groups = [FirstGroup(T0 + 3, 1, T0 + 4), FirstGroup(T0 + 25, 11, T0 + 26), FirstGroup(T0 + 53, 21, T0 + 54),
              FirstGroup(T0 + 83, 31, T0 + 84)]
    return summary, pods, events, groups


def test_three_restarts_four_attempts_each_with_its_reason():
    ledger = build_ledger(*three_restarts())
    whys = [row.why for row in ledger.rows]
    assert whys == [
        f"rank 1 deleted: pod {JOB}-node-0-1-bbbbb on w2 (kubectl delete, a kill, or R)",
        "node w2 lost (NotReady): its ranks' pods went with it",
        f"rank 0 failed: pod {JOB}-node-0-0-eeeee on w1, exit 137 (SIGKILL), OOMKilled",
        "running",
    ]
    assert [(row.start, row.end) for row in ledger.rows] == [(T0, T0 + 22), (T0 + 22, T0 + 50), (T0 + 50, T0 + 80),
                                                              (T0 + 80, None)]
    assert [row.first_step for row in ledger.rows] == [1, 11, 21, 31]
    assert (ledger.restarts_used, ledger.max_restarts, ledger.restarts_left) == (3, 5, 2)


def test_restarts_the_budget_does_not_count_leave_it_alone():
    summary, pods, events, groups = three_restarts()
    # JobSet v0.12.0 failure_policy.go restartJobSetAndIgnoreMaxRestartsActionApplier: restarts + 1,
    # restartsCountTowardsMax unchanged
    ledger = build_ledger(summary.model_copy(update={"restarts_counted": 1}), pods, events, groups)
    assert (ledger.restarts_used, ledger.restarts_counted, ledger.restarts_left) == (3, 1, 4)


def test_an_eviction_without_a_node_event_names_the_evicted_pod():
    summary, pods, events, groups = three_restarts()
    events = [e for e in events if e.reason != "NodeNotReady"]
    assert build_ledger(summary, pods, events, groups).rows[1].why.startswith(
        f"rank 1 evicted: pod {JOB}-node-0-1-ddddd on w2 (TaintManagerEviction")


def test_a_failed_pod_whose_trace_is_gone_is_the_one_its_job_did_not_delete():
    summary = JobSummary(name=JOB, phase=JobPhase.COMPLETE, num_nodes=2, restart_attempt=1, max_restarts=3,
                         created=T0, finished=T0 + 60)
    events = created(f"{JOB}-node-0-0-aaaaa", T0, "w1") + created(f"{JOB}-node-0-1-bbbbb", T0, "w2")
    events += [job_deleted(f"{JOB}-node-0-0-aaaaa", T0 + 20)]
    events += created(f"{JOB}-node-0-0-ccccc", T0 + 22, "w1") + created(f"{JOB}-node-0-1-ddddd", T0 + 22, "w2")
    ledger = build_ledger(summary, [], events, [])
    assert [row.why for row in ledger.rows] == [
        f"rank 1 failed: pod {JOB}-node-0-1-bbbbb on w2 (its exit code went with the pod)", "completed"]
    assert ledger.rows[1].end == T0 + 60


def test_exit_codes_past_128_name_their_signal():
    assert (exit_text(137), exit_text(143), exit_text(1), exit_text(None)) == (
        "exit 137 (SIGKILL)", "exit 143 (SIGTERM)", "exit 1", "exit code unknown")
