"""The JobSet controller (kubernetes-sigs/jobset v0.12 pkg/controllers/jobset_controller.go and
failure_policy.go): a JobSet becomes Jobs, and the Jobs' ends become the JobSet's.

Each replicated job makes `replicas` Jobs named `<jobset>-<replicated job>-<index>`, labelled
and annotated with the JobSet, its replicated job, the job index and the restart attempt, their
pods in the JobSet's DNS subdomain. Then, each time a Job or the JobSet changes:

- replicatedJobsStatus counts the current attempt's Jobs (ready, succeeded, failed, active,
  suspended); a finished JobSet deletes its active Jobs and does nothing more;
- Jobs of an earlier attempt (restart-attempt label below status.restarts) are deleted in the
  foreground, so their pods are gone before the attempt's new Jobs, of the same names, can be;
- a failed Job applies the failure policy: without one the JobSet fails (FailedJobs); with one
  its first matching rule's action, by default RestartJobSet: restarts + 1 (counted towards
  maxRestarts), the Restarting condition, an event; with the restarts used up, Failed with
  ReachedMaxRestarts. FailJobSet fails at once; RestartJobSetAndIgnoreMaxRestarts restarts
  without counting;
- the success policy (All, or Any, of its target replicated jobs' Jobs) completes it;
- suspend suspends its active Jobs (Suspended condition), resume unsuspends them.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Hashable

from backend.local.controllers import conditions
from backend.local.controllers.base import Controller, namespaced_key, owner_key
from backend.local.registry.events import Record
from backend.local.registry.client import Client
from backend.local.registry.upstream.jobset import EXCLUSIVE, NODE_SELECTOR_STRATEGY
from backend.local.registry.strategy import FOREGROUND, Obj

API = "jobset.x-k8s.io/v1alpha2"
GROUP = "jobset.x-k8s.io"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
GROUP_NAME = "jobset.sigs.k8s.io/group-name"
GROUP_REPLICAS = "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"
RESTARTS = "jobset.sigs.k8s.io/restart-attempt"
DEFAULT_GROUP = "default"

# pkg/constants
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
FAIL_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
RESTART_ACTION = ("RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action")
RESTART_IGNORING_ACTION = ("RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
                           "applying RestartJobSetAndIgnoreMaxRestarts failure policy action")
ALL_COMPLETED = ("AllJobsCompleted", "jobset completed successfully")


def job_name(jobset: str, rjob: str, index: int) -> str:
    return f"{jobset}-{rjob}-{index}"


def finished(jobset: Obj) -> bool:
    found = (jobset.get("status") or {}).get("conditions")
    return conditions.is_true(found, "Completed") or conditions.is_true(found, "Failed")


def job_finished(job: Obj) -> str | None:
    """"Complete" or "Failed" once the Job has ended, else None."""
    for kind in ("Complete", "Failed"):
        if conditions.is_true((job.get("status") or {}).get("conditions"), kind):
            return kind
    return None


class JobSetController(Controller):
    name = "jobset-controller"

    def __init__(self, client: Client, record: Record):
        super().__init__(client)
        self.record = record
        self.inform("JobSet", lambda _t, obj, _o: self.queue.add(namespaced_key(obj)))
        self.inform("Job", self._job_changed)

    def _job_changed(self, event_type: str, job: Obj, old: Obj | None) -> None:
        key = owner_key(job, "JobSet")
        if key is not None:
            self.queue.add(key)

    async def reconcile(self, key: Hashable) -> float | None:
        namespace, name = key
        jobset = self.client.get("JobSet", namespace, name)
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return None
        if (jobset.get("spec") or {}).get("managedBy") not in (None, "jobset.sigs.k8s.io/jobset-controller"):
            return None
        before = _status_copy(jobset)
        status = jobset.setdefault("status", {})
        status.setdefault("restarts", 0)
        jobs = self._children(jobset)
        status["replicatedJobsStatus"] = self._replicated_statuses(jobset, jobs)
        now = self.client.now()
        events: list[tuple[str, str, str]] = []
        if finished(jobset):
            self._delete(jobs["active"])
        else:
            self._delete(jobs["previous"])
            self._progress(jobset, jobs, now, events)
        if _status_copy(jobset) != before:
            self.client.update_status("JobSet", jobset)
        for event_type, reason, message in events:
            self.record(jobset, event_type, reason, message)
        return None

    def _progress(self, jobset: Obj, jobs: dict[str, list[Obj]], now: str, events: list) -> None:
        spec, status = jobset["spec"], jobset["status"]
        suspended = bool(spec.get("suspend"))
        if not suspended and _all_ready(jobset):
            self._set(jobset, "Restarting", "False", "JobsReady", "all jobs are ready", now, events, "Normal")
        if jobs["failed"]:
            self._failure_policy(jobset, jobs["failed"], now, events)
            return
        if jobs["successful"] and self._succeeded(jobset, jobs["successful"]):
            self._set(jobset, "Completed", "True", *ALL_COMPLETED, now, events, "Normal")
            self._set(jobset, "Restarting", "False", "JobSetCompleted", ALL_COMPLETED[1], now, events, "Normal")
            status["terminalState"] = "Completed"
            return
        self._create_jobs(jobset, jobs)
        if suspended:
            for job in jobs["active"]:
                if not (job.get("spec") or {}).get("suspend"):
                    job["spec"]["suspend"] = True
                    self.client.update("Job", job)
            self._set(jobset, "Suspended", "True", "SuspendedJobs", "jobset is suspended", now, events, "Normal")
            self._set(jobset, "Restarting", "False", "JobSetSuspended", "jobset is suspended", now, events, "Normal")
        else:
            for job in jobs["active"]:
                if (job.get("spec") or {}).get("suspend"):
                    job["spec"]["suspend"] = False
                    self.client.update("Job", job)
            self._set(jobset, "Suspended", "False", "ResumeJobs", "jobset is resumed", now, events, "Normal")

    # ------------------------------------------------------------------ the Jobs

    def _children(self, jobset: Obj) -> dict[str, list[Obj]]:
        """The JobSet's Jobs by bucket: previous (an earlier attempt), active, successful, failed."""
        restarts = int(jobset["status"].get("restarts") or 0)
        found: dict[str, list[Obj]] = {"previous": [], "active": [], "successful": [], "failed": []}
        for kind, job in self.client.dependents(jobset["metadata"]["uid"]):
            if kind != "Job":
                continue
            attempt = (job["metadata"].get("labels") or {}).get(RESTARTS, "")
            if not attempt.isdigit() or int(attempt) < restarts:
                found["previous"].append(job)
                continue
            end = job_finished(job)
            found["active" if end is None else "successful" if end == "Complete" else "failed"].append(job)
        return found

    def _delete(self, jobs: list[Obj]) -> None:
        for job in jobs:
            meta = job["metadata"]
            if not meta.get("deletionTimestamp"):
                self.client.delete("Job", meta["namespace"], meta["name"], propagation=FOREGROUND, uid=meta["uid"])

    def _create_jobs(self, jobset: Obj, jobs: dict[str, list[Obj]]) -> None:
        existing = {j["metadata"]["name"] for bucket in jobs.values() for j in bucket}
        for rjob in jobset["spec"]["replicatedJobs"]:
            for index in range(int(rjob.get("replicas", 1))):
                name = job_name(jobset["metadata"]["name"], rjob["name"], index)
                if name not in existing and self.client.peek("Job", jobset["metadata"]["namespace"], name) is None:
                    self.client.create("Job", construct_job(jobset, rjob, index))

    @staticmethod
    def _replicated_statuses(jobset: Obj, jobs: dict[str, list[Obj]]) -> list[Obj]:
        counts = {r["name"]: dict(ready=0, succeeded=0, failed=0, active=0, suspended=0)
                  for r in jobset["spec"]["replicatedJobs"]}

        def bucket_of(job: Obj) -> dict | None:
            return counts.get((job["metadata"].get("labels") or {}).get(REPLICATED_JOB, ""))

        for job in jobs["active"]:
            count, spec, status = bucket_of(job), job.get("spec") or {}, job.get("status") or {}
            if count is None:
                continue
            pods = min(int(spec.get("parallelism", 1)), int(spec.get("completions") or spec.get("parallelism", 1)))
            if int(status.get("succeeded", 0)) + int(status.get("ready", 0)) >= pods:
                count["ready"] += 1
            if int(status.get("active", 0)) > 0:
                count["active"] += 1
            if spec.get("suspend"):
                count["suspended"] += 1
        for bucket, field in (("successful", "succeeded"), ("failed", "failed")):
            for job in jobs[bucket]:
                count = bucket_of(job)
                if count is not None:
                    count[field] += 1
        return [{"name": name, **count} for name, count in counts.items()]

    # ------------------------------------------------------------------ policies

    def _succeeded(self, jobset: Obj, successful: list[Obj]) -> bool:
        policy = jobset["spec"].get("successPolicy") or {}
        targets = policy.get("targetReplicatedJobs") or []

        def targeted(rjob_name: str) -> bool:
            return not targets or rjob_name in targets

        done = sum(1 for j in successful if targeted((j["metadata"].get("labels") or {}).get(REPLICATED_JOB, "")))
        if policy.get("operator") == "Any":
            return done >= 1
        expected = sum(int(r.get("replicas", 1)) for r in jobset["spec"]["replicatedJobs"] if targeted(r["name"]))
        return done >= expected

    def _failure_policy(self, jobset: Obj, failed: list[Obj], now: str, events: list) -> None:
        policy = jobset["spec"].get("failurePolicy")
        first = min(failed, key=_failure_time)
        if policy is None:
            self._fail(jobset, *FAILED_JOBS, first, now, events)
            return
        rule, job = _matching_rule(policy.get("rules") or [], failed)
        action = rule.get("action", "RestartJobSet") if rule else "RestartJobSet"
        job = job or first
        status = jobset["status"]
        if action == "FailJobSet":
            self._fail(jobset, *FAIL_ACTION, job, now, events)
            return
        counting = action == "RestartJobSet"
        if counting and int(status.get("restartsCountTowardsMax") or 0) >= int(policy.get("maxRestarts") or 0):
            self._fail(jobset, *REACHED_MAX_RESTARTS, job, now, events)
            return
        reason, message = RESTART_ACTION if counting else RESTART_IGNORING_ACTION
        message = f"{message} (first failed job: {job['metadata']['name']})"
        status["restarts"] = int(status.get("restarts") or 0) + 1
        if counting:
            status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
        condition_reason = f"FailurePolicy_{rule['name']}" if rule else "DefaultFailurePolicy"
        self._set(jobset, "Restarting", "True", condition_reason, message, now, events, "Warning")
        events.append(("Warning", reason, message))

    def _fail(self, jobset: Obj, reason: str, message: str, job: Obj, now: str, events: list) -> None:
        message = f"{message} (first failed job: {job['metadata']['name']})"
        self._set(jobset, "Failed", "True", reason, message, now, events, "Warning")
        self._set(jobset, "Restarting", "False", "JobSetFailed", "jobset failed", now, events, "Normal")
        jobset["status"]["terminalState"] = "Failed"

    @staticmethod
    def _set(jobset: Obj, kind: str, state: str, reason: str, message: str, now: str, events: list,
             event_type: str) -> None:
        found = jobset["status"].setdefault("conditions", [])
        if conditions.set_condition(found, kind, state, reason, message, now, only_if_true=True):
            events.append((event_type, reason, message))


def construct_job(jobset: Obj, rjob: Obj, index: int) -> Obj:
    """A Job of replicated job `rjob` (constructJob, labelAndAnnotateObject)."""
    meta, spec = jobset["metadata"], jobset["spec"]
    template = copy.deepcopy(rjob.get("template") or {})
    name = job_name(meta["name"], rjob["name"], index)
    tags = _tags(jobset, rjob, index, name)
    job_meta = template.get("metadata") or {}
    job_spec = template.get("spec") or {}
    pod_template = job_spec.setdefault("template", {})
    pod_meta = pod_template.setdefault("metadata", {})
    placement = _exclusive_placement(jobset, rjob)
    for target in (job_meta, pod_meta):
        target["labels"] = {**(target.get("labels") or {}), **tags}
        target["annotations"] = {**(target.get("annotations") or {}), **tags, **placement}
    if (spec.get("network") or {}).get("enableDNSHostnames", True):
        pod_template.setdefault("spec", {})["subdomain"] = (spec.get("network") or {}).get("subdomain") or meta["name"]
    job_spec["suspend"] = bool(spec.get("suspend"))
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": meta["namespace"], "labels": job_meta["labels"],
                         "annotations": job_meta["annotations"],
                         "ownerReferences": [{"apiVersion": API, "kind": "JobSet", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": job_spec}


def _exclusive_placement(jobset: Obj, rjob: Obj) -> dict[str, str]:
    """The exclusive placement annotations (labelAndAnnotateObject): the JobSet's, a replicated
    job's template's over them, onto its Jobs and their pods, where the pod webhook reads them
    (registry/upstream/jobset.py)."""
    found: dict[str, str] = {}
    for given in ((jobset["metadata"].get("annotations") or {}),
                  (((rjob.get("template") or {}).get("metadata") or {}).get("annotations") or {})):
        if EXCLUSIVE in given:
            found[EXCLUSIVE] = given[EXCLUSIVE]
            if NODE_SELECTOR_STRATEGY in given:
                found[NODE_SELECTOR_STRATEGY] = given[NODE_SELECTOR_STRATEGY]
    return found


def _tags(jobset: Obj, rjob: Obj, index: int, name: str) -> dict[str, str]:
    meta, rjobs = jobset["metadata"], jobset["spec"]["replicatedJobs"]
    group = rjob.get("groupName") or DEFAULT_GROUP
    before = sum(int(r.get("replicas", 1)) for r in rjobs[:rjobs.index(rjob)])
    in_group = [r for r in rjobs if (r.get("groupName") or DEFAULT_GROUP) == group]
    before_in_group = sum(int(r.get("replicas", 1)) for r in in_group[:in_group.index(rjob)])
    return {
        JOBSET_NAME: meta["name"], JOBSET_UID: meta["uid"], REPLICATED_JOB: rjob["name"],
        RESTARTS: str(int((jobset.get("status") or {}).get("restarts") or 0)),
        REPLICATED_JOB_REPLICAS: str(int(rjob.get("replicas", 1))),
        GLOBAL_REPLICAS: str(sum(int(r.get("replicas", 1)) for r in rjobs)),
        JOB_INDEX: str(index), JOB_KEY: hashlib.sha1(f"{meta['namespace']}/{name}".encode()).hexdigest(),  # noqa: S324
        JOB_GLOBAL_INDEX: str(before + index), GROUP_NAME: group,
        GROUP_REPLICAS: str(sum(int(r.get("replicas", 1)) for r in in_group)),
        JOB_GROUP_INDEX: str(before_in_group + index),
    }


def _all_ready(jobset: Obj) -> bool:
    total = sum(int(r.get("replicas", 1)) for r in jobset["spec"]["replicatedJobs"])
    ready = sum(int(s["ready"]) + int(s["succeeded"]) for s in jobset["status"]["replicatedJobsStatus"])
    return total == ready


def _failure_time(job: Obj) -> str:
    found = conditions.find((job.get("status") or {}).get("conditions"), "Failed", "True")
    return (found or {}).get("lastTransitionTime") or ""


def _matching_rule(rules: list[Obj], failed: list[Obj]) -> tuple[Obj | None, Obj | None]:
    """The first rule that applies to a failed Job, with the earliest-failed Job it applies to."""
    for rule in rules:
        applicable = []
        for job in failed:
            failure = conditions.find((job.get("status") or {}).get("conditions"), "Failed", "True") or {}
            rjob = (job["metadata"].get("labels") or {}).get(REPLICATED_JOB, "")
            if rule.get("onJobFailureReasons") and failure.get("reason") not in rule["onJobFailureReasons"]:
                continue
            patterns = rule.get("onJobFailureMessagePatterns") or []
            if patterns and not any(_matches(p, failure.get("message") or "") for p in patterns):
                continue
            if rule.get("targetReplicatedJobs") and rjob not in rule["targetReplicatedJobs"]:
                continue
            applicable.append(job)
        if applicable:
            return rule, min(applicable, key=_failure_time)
    return None, None


def _matches(pattern: str, message: str) -> bool:
    try:
        return re.search(pattern, message) is not None
    except re.error:
        return False


def _status_copy(jobset: Obj) -> object:
    return copy.deepcopy(jobset.get("status"))
