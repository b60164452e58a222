"""A RayJob's life on the embedded cluster with real Ray, read through the kube backend as the
cockpit reads it: the comparison's RayJob (manifests/rayjob.yaml running the plan) with a worker
pod killed mid-run. Its Ray Train workers shown as pods found by KubeRay's labels, the job read
from the status KubeRay v1.7.0 would write, the killed pod making Ray restart the group from a
checkpoint, the apply repeated, the delete taking every pod (rayjob_record.py records it all).
tests/local/test_rayjobs.py applies the manifest as is and kills the cluster under it."""

from __future__ import annotations

import re
from collections import defaultdict

from backend.models import (
    DRIVER_RANK,
    LABEL_RANK,
    LABEL_RESTART_ATTEMPT,
    RAY_LABEL_CLUSTER,
    RAY_LABEL_NODE_TYPE,
    RAY_LABEL_ORIGINATED_NAME,
    JobPhase,
    PodEventType,
    PodPhase,
)
from tests.ray.conftest import PLAN
from training.logfmt import parse_line


def _killed(record):
    """The pod the comparison killed: the planned rank's of the first group."""
    (name,) = [name for name, states in record.workers(attempt=0).items() if states[0].rank == PLAN.kill_rank]
    return name


def test_the_rayjob_completes_after_one_restart_and_applies_again_unchanged(measured):
    record = measured.rayjob
    final = record.jobs[record.job]
    assert final.phase == JobPhase.COMPLETE and final.launcher == "ray"
    # max_restarts: the entrypoint's --max-failures, as resources.ray_job writes it
    assert (final.num_nodes, final.restart_attempt, final.max_restarts) == (PLAN.workers, 1, 2)
    assert final.volumes == [record.job.removesuffix("-ray")]
    assert record.applied_again == f"rayjob/{record.job} unchanged"


def test_two_worker_pods_run_beside_the_driver_with_identical_losses(measured):
    record, job = measured.rayjob, measured.rayjob.job
    first = record.workers(attempt=0)
    assert len(first) == 2
    for name, states in first.items():
        rank = states[0].rank
        assert re.fullmatch(rf"{job}-worker-{rank}-[a-z0-9]{{5}}", name)
        assert states[0].labels[LABEL_RANK] == str(rank) and states[0].labels[LABEL_RESTART_ATTEMPT] == "0"
        assert PodPhase.RUNNING in {s.phase for s in states}
    driver = record.driver()
    assert re.fullmatch(rf"{job}-driver-[a-z0-9]{{5}}", driver.name)
    assert driver.labels[LABEL_RANK] == "driver" and driver.phase == PodPhase.SUCCEEDED and driver.exit_code == 0

    losses: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for line in measured.ray_lines:
        fields = parse_line(line.text)
        if "rank" in fields and "world" in fields:  # a worker's logfmt line: it sits in its pod
            assert line.rank == int(fields["rank"]) and line.pod.startswith(f"{job}-worker-{line.rank}-"), line
        if line.pod == driver.name:
            assert line.rank == DRIVER_RANK and line.step is None, line
        if line.step is not None:
            losses[line.step][line.rank].add(fields["loss"])
    assert sorted(losses) == list(range(1, PLAN.steps + 1))
    for step, by_rank in losses.items():
        assert set(by_rank) == {0, 1}, step
        # all-reduced: both ranks print the same loss; steps redone after the restart print it again
        assert len(by_rank[0]) == 1 and by_rank[0] == by_rank[1], (step, by_rank)


def test_a_killed_worker_pod_makes_ray_restart_the_group(measured):
    record = measured.rayjob
    events = record.pod_events
    first = record.workers(attempt=0)
    killed = _killed(record)
    # kill_pod is a delete with grace period 0: the killed pod goes at once, not kept Failed
    (last,) = [e for e in events if e.pod.name == killed][-1:]
    assert (last.type, last.pod.reason) == (PodEventType.DELETED, "Deleted")
    (peer,) = [name for name in first if name != killed]
    # Ray tore it down: Failed, its container terminated with reason Error (the API's word for it)
    assert any((p.phase, p.reason) == (PodPhase.FAILED, "Error") for p in first[peer]), first[peer]
    # ... before it started the next one: both old pods ended before a new one appeared
    order = [(e.pod.name, e.pod.phase, e.type.value) for e in events]
    first_new = next(i for i, e in enumerate(events) if e.pod.restart_attempt == 1 and e.pod.rank != DRIVER_RANK)
    for name, ended in ((killed, lambda phase, kind: kind == "DELETED"),
                        (peer, lambda phase, kind: phase == PodPhase.FAILED)):
        assert any(n == name and ended(phase, kind) for n, phase, kind in order[:first_new]), name
    deleted = {e.pod.name for e in events if e.type == PodEventType.DELETED}
    assert set(first) <= deleted  # replaced, as a TrainJob's group is

    second = record.workers(attempt=1)
    assert sorted(states[0].rank for states in second.values()) == [0, 1]
    assert not set(second) & set(first)
    final_workers = [p for p in record.final_pods if p.rank != DRIVER_RANK]
    assert sorted(p.name for p in final_workers) == sorted(second)
    assert all(p.phase == PodPhase.SUCCEEDED for p in final_workers)
    last_steps = {line.pod: line.step for line in measured.ray_lines if line.step is not None}
    assert [last_steps[p.name] for p in final_workers] == [PLAN.steps, PLAN.steps]
    assert record.driver().restart_attempt == 1  # the driver drives the current group

    phases = [(j.phase, j.restart_attempt) for j in record.phases()]
    assert (JobPhase.RESTARTING, 0) in phases and (JobPhase.RUNNING, 1) in phases
    assert phases.index((JobPhase.RESTARTING, 0)) < phases.index((JobPhase.RUNNING, 1))
    assert phases[-1] == (JobPhase.COMPLETE, 1)
    resumed = {line.pod for line in measured.ray_lines if "event=resumed" in line.text}
    assert resumed == set(second)


def test_no_process_of_the_driver_pod_is_left_after_the_job(measured):
    assert measured.rayjob.left_running == []


def test_the_rayjob_is_a_ray_job_of_the_kube_backend(measured):
    record = measured.rayjob
    first = record.phases()[0]
    assert first.launcher == "ray" and first.phase in (JobPhase.CREATED, JobPhase.RUNNING)
    listed = record.jobs[record.job]
    assert (listed.launcher, listed.num_nodes, listed.max_restarts) == ("ray", PLAN.workers, 2)


def test_its_status_is_kuberays(measured):
    """What the kube backend reads on any cluster with KubeRay v1.7.0 (apis/ray/v1/rayjob_types.go)."""
    status = measured.rayjob.status
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["failed"], status["succeeded"]) == (
        "Complete", "SUCCEEDED", 1, 1)
    assert status["rayClusterName"] and status["startTime"] <= status["endTime"]


def test_driver_and_worker_pods_are_found_by_kuberays_labels(measured):
    """KubeRay's pod labels (ray-operator/controllers/ray/common/pod.go labelPod)."""
    record = measured.rayjob
    cluster = record.status["rayClusterName"]
    pods = {e.pod.name: e.pod for e in record.pod_events}
    assert all(p.labels[RAY_LABEL_CLUSTER] == cluster for p in pods.values())
    (driver,) = [p for p in pods.values() if p.rank == DRIVER_RANK]
    assert driver.labels[RAY_LABEL_ORIGINATED_NAME] == record.job and driver.labels[RAY_LABEL_NODE_TYPE] == "head"
    workers = sorted((p.restart_attempt, p.rank) for p in pods.values() if p.rank != DRIVER_RANK)
    assert workers == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(pods[n].labels[RAY_LABEL_NODE_TYPE] == "worker" for n in pods if n != driver.name)
    # matched by both selectors (submitter and head at once), the driver is still added once
    added = [e.pod.name for e in record.pod_events if e.type == PodEventType.ADDED]
    assert len(added) == len(set(added)) == 5


def test_delete_removes_the_rayjob_and_its_pods(measured):
    record = measured.rayjob
    assert record.gone >= {p.name for p in record.final_pods}
    assert str(record.after_delete) == f"TrainJob {record.job}: not found in namespace default"
    assert record.job not in [j.name for j in record.listed_after_delete]
