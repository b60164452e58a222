"""The Trainer, JobSet, Job and scheduling controllers together in-process, against a real registry,
on the lesson's own manifests; the test plays the kubelet, writing pod phases as one would.

Upstream's rules cited per test: Trainer v2.3 (pkg/runtime/framework/plugins/{jobset,torch}),
JobSet v0.12 (pkg/controllers/jobset_controller.go, failure_policy.go), the Job controller
(pkg/controller/job) and kube-scheduler (NodeResourcesFit, VolumeBinding)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from backend.local.registry.events import Events
from backend.local.controllers.gc import GarbageCollector
from backend.local.controllers.job import TRACKING_FINALIZER, JobController
from backend.local.controllers.jobset import JobSetController
from backend.local.controllers.scheduler import Scheduler
from backend.local.controllers.trainjob import TrainJobController
from tests.controlplane import add_node, condition, eventually, gone, plane, running, until

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def _manifest(name: str) -> dict:
    return yaml.safe_load((MANIFESTS / name).read_text())


def _lesson_resources(client, namespace: str = "default") -> None:
    """The lesson's runtime and volume (its claim Bound, as its provisioner binds it) in `namespace`."""
    client.create("TrainingRuntime", {**_manifest("runtime.yaml"), "metadata": {
        **_manifest("runtime.yaml")["metadata"], "namespace": namespace}})
    claim = client.create("PersistentVolumeClaim", {**_manifest("volume.yaml"), "metadata": {
        **_manifest("volume.yaml")["metadata"], "namespace": namespace}})
    claim["status"] = {"phase": "Bound"}
    client.update_status("PersistentVolumeClaim", claim)


def _cluster(nodes: int = 1, **node):
    client = plane()
    for i in range(nodes):
        add_node(client, f"node-{i + 1}", **node)
    _lesson_resources(client)
    events = Events(client, host="test")
    controllers = (TrainJobController(client, events.recorder("trainjob-controller"), clock=lambda: 0.0),
                   JobSetController(client, events.recorder("jobset-controller")),
                   JobController(client, events.recorder("job-controller")),
                   Scheduler(client, events.recorder("default-scheduler")), GarbageCollector(client))
    return client, controllers


def _trainjob(client, name: str = "lesson-ddp", namespace: str = "default", **spec) -> dict:
    job = _manifest("trainjob.yaml")
    job["metadata"] = {"name": name, "namespace": namespace}
    job["spec"].update(spec)
    return client.create("TrainJob", job)


def _pods(client, attempt: int | None = None, namespace: str = "default") -> list[dict]:
    pods = client.list("Pod", namespace)
    if attempt is not None:
        pods = [p for p in pods if p["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt") == str(attempt)]
    return sorted(pods, key=lambda p: p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])


async def _bound_pods(client, count: int, attempt: int = 0, namespace: str = "default") -> list[dict]:
    def bound() -> list[dict] | None:
        pods = _pods(client, attempt, namespace)
        return pods if len(pods) == count and all(p["spec"].get("nodeName") for p in pods) else None
    return await eventually(client, bound)


def _run(client, pod: dict, phase: str = "Running", code: int | None = None) -> None:
    """What a kubelet reports of a pod's container."""
    state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}} if phase == "Running" else \
        {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}

    def report(live: dict) -> None:
        live["status"].update(phase=phase, containerStatuses=[{"name": "node", "restartCount": 0, "state": state,
                                                               "ready": phase == "Running"}])
        live["status"]["conditions"] = [c for c in live["status"].get("conditions", []) if c["type"] != "Ready"] + [
            {"type": "Ready", "status": str(phase == "Running")}]
    client.mutate("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], report, status=True)


def _ended(client, pod: dict, code: int) -> None:
    """A pod's process ended; if it was being deleted, the kubelet's last word."""
    _run(client, pod, "Succeeded" if code == 0 else "Failed", code)
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    live = client.get("Pod", namespace, name)
    if live is not None and live["metadata"].get("deletionTimestamp"):
        client.delete("Pod", namespace, name, grace=0)


async def test_a_trainjob_becomes_a_jobset_jobs_and_bound_pods_as_upstreams_do():
    client, controllers = _cluster()
    async with running(*controllers):
        _trainjob(client)
        pods = await _bound_pods(client, 2)
        jobset = client.get("JobSet", "default", "lesson-ddp")
        assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
        rjob = jobset["spec"]["replicatedJobs"][0]
        assert (rjob["template"]["spec"]["parallelism"], rjob["template"]["spec"]["completions"]) == (2, 2)
        container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
        assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "1"
        assert env["PET_MASTER_ADDR"] == "lesson-ddp-node-0-0.lesson-ddp" and env["PET_MASTER_PORT"] == "29500"
        assert env["PET_NODE_RANK"] == {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
        assert container["volumeMounts"] == [{"name": "checkpoints", "mountPath": "/checkpoints"}]  # runtimePatches
        assert container["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}

        job = client.get("Job", "default", "lesson-ddp-node-0")
        assert job["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0"
        assert job["spec"]["backoffLimit"] == 0 and job["spec"]["completionMode"] == "Indexed"
        for rank, pod in enumerate(pods):
            meta, spec = pod["metadata"], pod["spec"]
            assert meta["name"].startswith(f"lesson-ddp-node-0-{rank}-") and len(meta["name"]) == 25
            assert meta["labels"]["jobset.sigs.k8s.io/jobset-name"] == "lesson-ddp"
            assert meta["annotations"]["batch.kubernetes.io/job-completion-index"] == str(rank)
            assert (spec["hostname"], spec["subdomain"]) == (f"lesson-ddp-node-0-{rank}", "lesson-ddp")
            assert meta["finalizers"] == [TRACKING_FINALIZER] and spec["nodeName"] == "node-1"
            assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "checkpoints"
        scheduled = [e for e in client.list("Event", "default") if e["reason"] == "Scheduled"]
        assert sorted(e["involvedObject"]["name"] for e in scheduled) == sorted(p["metadata"]["name"] for p in pods)
        assert all(e["count"] == 1 for e in scheduled)  # once each, when bound

        for pod in pods:
            _run(client, pod)
        trainjob = await until(client, "TrainJob", "default", "lesson-ddp",
                               lambda o: (o.get("status") or {}).get("jobsStatus", [{}])[0].get("ready") == 1)
        assert trainjob["status"]["jobsStatus"] == client.get("JobSet", "default", "lesson-ddp")["status"][
            "replicatedJobsStatus"]  # the two statuses agree

        for pod in pods:
            _ended(client, pod, 0)
        done = await until(client, "TrainJob", "default", "lesson-ddp", lambda o: condition(o, "Complete"))
        assert condition(done, "Complete")["reason"] == "AllJobsCompleted"
        assert client.get("JobSet", "default", "lesson-ddp")["status"]["terminalState"] == "Completed"


async def test_a_failed_pod_restarts_the_group_with_the_next_attempt_until_max_restarts():
    client, controllers = _cluster()
    async with running(*controllers):
        _trainjob(client)
        for attempt in range(4):  # the runtime's maxRestarts is 3
            victim, survivor = (await _bound_pods(client, 2, attempt))[::-1]
            for pod in (victim, survivor):
                _run(client, pod)
            client.delete("Pod", "default", victim["metadata"]["name"], grace=0)  # kill_pod
            # the Job counts the deleted pod failed and ends the rest of the group
            await until(client, "Pod", "default", survivor["metadata"]["name"],
                        lambda o: o is not None and o["metadata"].get("deletionTimestamp"))
            job = client.get("Job", "default", "lesson-ddp-node-0")
            assert condition(job, "FailureTarget")["reason"] == "BackoffLimitExceeded"
            assert not condition(job, "Failed")  # not before the survivor has ended (it saves its step)
            _ended(client, victim, 137)
            _ended(client, survivor, 143)
        failed = await until(client, "TrainJob", "default", "lesson-ddp", lambda o: condition(o, "Failed"))
        assert condition(failed, "Failed")["reason"] == "ReachedMaxRestarts"
        assert condition(failed, "Failed")["message"] == ("jobset failed due to reaching max number of restarts "
                                                          "(first failed job: lesson-ddp-node-0)")
        jobset = client.get("JobSet", "default", "lesson-ddp")
        assert (jobset["status"]["restarts"], jobset["status"]["terminalState"]) == (3, "Failed")
        restarting = [e for e in client.list("Event", "default") if e["reason"] == "RestartJobSetFailurePolicyAction"]
        assert len(restarting) == 1 and restarting[0]["count"] == 3


async def test_suspend_and_resume_a_running_trainjob():
    client, controllers = _cluster()
    async with running(*controllers):
        _trainjob(client)
        for pod in await _bound_pods(client, 2):
            _run(client, pod)
        live = client.get("TrainJob", "default", "lesson-ddp")
        live["spec"]["suspend"] = True
        client.update("TrainJob", live)
        job = await until(client, "Job", "default", "lesson-ddp-node-0", lambda o: condition(o, "Suspended"))
        assert job["spec"]["suspend"] is True
        for pod in _pods(client):
            assert pod["metadata"].get("deletionTimestamp")  # the Job ends its pods
            _ended(client, pod, 143)
        suspended = await until(client, "TrainJob", "default", "lesson-ddp", lambda o: condition(o, "Suspended"))
        assert condition(suspended, "Suspended")["message"] == "TrainJob is suspended"

        live = client.get("TrainJob", "default", "lesson-ddp")
        live["spec"]["suspend"] = False
        client.update("TrainJob", live)
        await until(client, "TrainJob", "default", "lesson-ddp", lambda o: condition(o, "Suspended", "False"))
        assert len(await _bound_pods(client, 2)) == 2  # the same Job runs its pods again


@pytest.mark.parametrize("reason, make", [
    ("1 Insufficient cpu", lambda c: _trainjob(c, trainer={**_manifest("trainjob.yaml")["spec"]["trainer"],
                                                           "resourcesPerNode": {"requests": {"cpu": "64"}}})),
    ('persistentvolumeclaim "checkpoints" is being deleted',
     lambda c: (c.delete("PersistentVolumeClaim", "default", "checkpoints"), _trainjob(c))),
])
async def test_a_pod_that_fits_nowhere_stays_pending_and_says_why(reason, make):
    client, controllers = _cluster()
    async with running(*controllers):
        make(client)
        await eventually(client, lambda: len(_pods(client)) == 2 and all(
            condition(p, "PodScheduled", "False") for p in _pods(client)))
        for pod in _pods(client):
            assert not pod["spec"].get("nodeName")
            assert reason in condition(pod, "PodScheduled", "False")["message"]
        events = [e for e in client.list("Event", "default") if e["involvedObject"]["kind"] == "Pod"]
        assert {e["reason"] for e in events} == {"FailedScheduling"}  # never "Scheduled" for an unbound pod


async def test_deleting_the_trainjob_takes_everything_it_made():
    client, controllers = _cluster()
    async with running(*controllers):
        _trainjob(client)
        pods = await _bound_pods(client, 2)
        client.delete("TrainJob", "default", "lesson-ddp", propagation="Background")
        await until(client, "JobSet", "default", "lesson-ddp", gone)
        for pod in pods:
            await until(client, "Pod", "default", pod["metadata"]["name"],
                        lambda o: o is None or o["metadata"].get("deletionTimestamp"))



async def _running_trainjob(client) -> list:
    """The lesson's TrainJob made, its two pods bound and running."""
    _trainjob(client)
    pods = await _bound_pods(client, 2)
    for pod in pods:
        _run(client, pod)
    return pods

async def test_a_deleted_trainjobs_pods_go_once_they_end_even_with_a_new_job_of_its_name():
    """The running pods of a deleted TrainJob end after their Job is gone, while the same
    TrainJob is applied again (a learner starting over): upstream's Job controller takes the
    tracking finalizer off such orphans (job_controller.go: deleteJob -> cleanupPodFinalizers,
    updatePod -> enqueueOrphanPod -> syncOrphanPod; resolveControllerRef counts a Job of another
    uid as none), so they go instead of staying Terminating beside the new group."""
    client, controllers = _cluster()
    async with running(*controllers):
        old = await _running_trainjob(client)
        client.delete("TrainJob", "default", "lesson-ddp", propagation="Background")
        await until(client, "Job", "default", "lesson-ddp-node-0", gone)
        _trainjob(client)  # applied again: a new Job of the same name
        await eventually(client, lambda: len([p for p in _pods(client)
                                              if not p["metadata"].get("deletionTimestamp")]) == 2)
        for pod in old:
            _ended(client, pod, 143)  # SIGTERM'd by the teardown; the kubelet's last word
        for pod in old:
            await until(client, "Pod", "default", pod["metadata"]["name"], gone)


async def test_suspending_a_finished_trainjob_keeps_it_finished_and_runs_nothing():
    """Trainer v2.3 reconciles no objects of a finished TrainJob (IsTrainJobFinished) but still
    sets its Suspended condition; JobSet v0.12 leaves a finished JobSet alone."""
    client, controllers = _cluster()
    async with running(*controllers):
        _trainjob(client)
        for pod in await _bound_pods(client, 2):
            _ended(client, pod, 0)
        await until(client, "TrainJob", "default", "lesson-ddp", lambda o: condition(o, "Complete"))
        jobset = client.get("JobSet", "default", "lesson-ddp")
        live = client.get("TrainJob", "default", "lesson-ddp")
        live["spec"]["suspend"] = True
        client.update("TrainJob", live)
        suspended = await until(client, "TrainJob", "default", "lesson-ddp", lambda o: condition(o, "Suspended"))
        assert condition(suspended, "Complete") and not condition(suspended, "Failed")
        assert client.get("JobSet", "default", "lesson-ddp")["metadata"]["resourceVersion"] == \
            jobset["metadata"]["resourceVersion"]  # not suspended, not built again
        assert [p["status"]["phase"] for p in _pods(client)] == ["Succeeded", "Succeeded"]  # no new pod


async def test_orphaning_a_trainjob_keeps_its_jobset_and_pods_running():
    """kubectl delete trainjob --cascade=orphan: the TrainJob goes, its JobSet stays without the
    owner reference, and its pods keep running."""
    client, controllers = _cluster()
    async with running(*controllers):
        pods = await _running_trainjob(client)
        client.delete("TrainJob", "default", "lesson-ddp", propagation="Orphan")
        await until(client, "TrainJob", "default", "lesson-ddp", gone)
        await until(client, "JobSet", "default", "lesson-ddp", lambda o: not o["metadata"].get("ownerReferences"))
        for pod in pods:
            live = client.get("Pod", "default", pod["metadata"]["name"])
            assert live["status"]["phase"] == "Running" and not live["metadata"].get("deletionTimestamp")


async def test_the_same_names_in_two_namespaces_are_two_jobs():
    """Runtime, claim and TrainJob of one name in two namespaces: two JobSets, two groups of pods;
    one namespace's job failing restarts only its own group."""
    client, controllers = _cluster()
    client.create("Namespace", {"metadata": {"name": "team-b"}})
    _lesson_resources(client, "team-b")
    async with running(*controllers):
        _trainjob(client)
        _trainjob(client, namespace="team-b")
        ours, theirs = await _bound_pods(client, 2), await _bound_pods(client, 2, namespace="team-b")
        assert {p["metadata"]["uid"] for p in ours}.isdisjoint(p["metadata"]["uid"] for p in theirs)
        assert client.get("JobSet", "team-b", "lesson-ddp")["metadata"]["ownerReferences"][0]["uid"] == \
            client.get("TrainJob", "team-b", "lesson-ddp")["metadata"]["uid"]
        for pod in ours + theirs:
            _run(client, pod)
        client.delete("Pod", "team-b", theirs[0]["metadata"]["name"], grace=0)
        for pod in theirs:
            _ended(client, pod, 137)
        await _bound_pods(client, 2, attempt=1, namespace="team-b")
        assert [p["metadata"]["name"] for p in _pods(client)] == [p["metadata"]["name"] for p in ours]
        assert all(p["status"]["phase"] == "Running" for p in _pods(client))


async def test_a_trainjob_that_cannot_become_a_jobset_says_why_in_an_event():
    """A runtimePatch naming a replicated job the runtime lacks passes Trainer v2.3.0's admission:
    TrainingRuntime.ValidateObjects merges the patches into the runtime's template before the
    jobset plugin's Validate lists its replicated jobs (pkg/runtime/core/trainingruntime.go
    newRuntimeInfo, mergeRuntimePatches), so "must not have replicated job that doesn't exist
    in the runtime job template" never fires for it. Building its JobSet then fails (here: the
    patched job's pod has no command), and TrainJobReconciler.Reconcile
    (pkg/controller/trainjob_controller.go) records a Warning Event TrainJobResourcesCreationFailed,
    "TrainJob resources reconciliation failed: <error>", and retries with a back-off; v2.3.0 sets
    no condition for it (its TODO)."""
    client, controllers = _cluster()
    patch = {"manager": "example.com/tuner", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "extra", "template": {"spec": {"template": {"spec": {"containers": [
            {"name": "node", "image": "x"}]}}}}}]}}}}
    async with running(*controllers):
        _trainjob(client, runtimePatches=[patch])
        said = await eventually(client, lambda: [e for e in client.list("Event", "default")
                                                 if e["reason"] == "TrainJobResourcesCreationFailed"])
    (event,) = said
    assert (event["type"], event["involvedObject"]["kind"], event["involvedObject"]["name"]) == \
        ("Warning", "TrainJob", "lesson-ddp")
    assert event["message"].startswith("TrainJob resources reconciliation failed: JobSet.jobset.x-k8s.io "
                                       '"lesson-ddp" is invalid: ')
    assert "command" in event["message"]
    assert client.get("JobSet", "default", "lesson-ddp") is None
