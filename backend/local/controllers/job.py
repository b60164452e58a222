"""The Job controller (kubernetes pkg/controller/job/job_controller.go): a batch/v1 Job's pods,
and its pods' ends as the Job's status.

- Pods: up to `parallelism` at a time until `completions` succeed. An Indexed Job's pod of
  index i is `<job>-<i>-<5 chars>` (hostname `<job>-<i>`), labelled and annotated
  batch.kubernetes.io/job-completion-index, with JOB_COMPLETION_INDEX in its env; every pod
  is owned by the Job and carries the `batch.kubernetes.io/job-tracking` finalizer until the
  Job has counted its end, so a pod deleted the moment it ends is still counted.
- Counting: a pod that ended, or is being deleted without having succeeded, is counted
  (succeeded, failed, completedIndexes) and its finalizer removed, in upstream's three steps
  through status.uncountedTerminatedPods, so that no failed write loses or repeats a count. More failures than
  backoffLimit (or, for restartPolicy OnFailure, any container restart with backoffLimit 0:
  pastBackoffLimitOnFailure) fails the Job (BackoffLimitExceeded), activeDeadlineSeconds past
  its start too (DeadlineExceeded). Every index succeeded completes it.
- Ending: first FailureTarget (or SuccessCriteriaMet) while its remaining pods are deleted, then
  Failed (or Complete) once none is left running: a JobSet restarting on the Job's failure finds
  the group's survivors already ended (they saved their step in their grace period).
- suspend deletes the active pods (Suspended); resume creates them again (startTime anew).
- A Job being deleted releases its pods' finalizers once they have ended, so the garbage
  collector can finish them. A pod whose Job is gone (or is another Job of the same name: a
  TrainJob deleted and applied again) is an orphan: it loses its finalizer when its Job goes
  (deleteJob -> cleanupPodFinalizers) and at its next change (updatePod -> enqueueOrphanPod),
  checked again then (syncOrphanPod: unless a live, unfinished Job of its uid holds it), instead
  of staying Terminating for good beside the new job's pods. A job is its uid, not its name.
"""

from __future__ import annotations

import calendar
import copy
import time
from typing import Callable, Hashable

from backend.local.controllers import conditions
from backend.local.controllers.base import Controller, namespaced_key, owner_key
from backend.local.registry.events import Record
from backend.local.registry.informer import DELETED
from backend.local.registry.client import Client
from backend.local.registry.strategy import Obj

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
ORPHAN = "orphan-pod"  # a queue key's first part: (ORPHAN, namespace, pod name); a Job's is (namespace, name)
INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FIELD_PATH = f"metadata.annotations['{INDEX}']"
BACKOFF_LIMIT = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE = ("DeadlineExceeded", "Job was active longer than specified deadline")
COMPLETED = ("CompletionsReached", "Reached expected number of succeeded pods")


def parse_time(value: str | None) -> float | None:
    """A metav1.Time (RFC 3339, seconds, UTC) as epoch seconds."""
    if not value:
        return None
    try:
        return float(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _index(pod: Obj) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX)
    return int(value) if value is not None and value.isdigit() else None


def index_ranges(indexes: set[int]) -> str:
    """completedIndexes' format: "0-2,5"."""
    parts, ordered = [], sorted(indexes)
    start = prev = None
    for i in ordered + [None]:
        if i is not None and prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    return ",".join(parts)


def parse_ranges(text: str | None) -> set[int]:
    found: set[int] = set()
    for part in (text or "").split(","):
        if "-" in part:
            low, high = part.split("-")
            found.update(range(int(low), int(high) + 1))
        elif part.strip():
            found.add(int(part))
    return found


class JobController(Controller):
    name = "job-controller"

    def __init__(self, client: Client, record: Record, clock: Callable[[], float] = time.time):
        super().__init__(client)
        self.record, self.clock = record, clock
        self.inform("Job", self._job_changed)
        self.inform("Pod", self._pod_changed)

    def _job_changed(self, event_type: str, job: Obj, old: Obj | None) -> None:
        self.queue.add(namespaced_key(job))
        if event_type == DELETED:  # deleteJob -> cleanupPodFinalizers: its pods are orphans now
            for kind, pod in self.client.dependents(job["metadata"]["uid"]):
                if kind == "Pod" and TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or []):
                    self.queue.add((ORPHAN, pod["metadata"]["namespace"], pod["metadata"]["name"]))

    def _pod_changed(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        key = owner_key(pod, "Job")
        if key is None:
            return
        if event_type != DELETED and TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or []) \
                and self._owner(pod) is None:
            self.queue.add((ORPHAN, pod["metadata"]["namespace"], pod["metadata"]["name"]))
        else:
            self.queue.add(key)

    def _owner(self, pod: Obj) -> Obj | None:
        """resolveControllerRef: the pod's Job, if it is still the one that made it (same uid)."""
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job" and ref.get("controller"):
                job = self.client.get("Job", pod["metadata"]["namespace"], ref["name"])
                return job if job is not None and job["metadata"]["uid"] == ref.get("uid") else None
        return None

    def _release_orphan(self, namespace: str, name: str) -> None:
        """syncOrphanPod: the tracking finalizer off a pod no live Job counts, unless a Job
        has taken it since (the same uid, not finished)."""
        pod = self.client.get("Pod", namespace, name)
        if pod is None:
            return
        job = self._owner(pod)
        if job is not None and not any(conditions.is_true((job.get("status") or {}).get("conditions") or [], c)
                                       for c in ("Complete", "Failed")):
            return
        self._release(pod)

    async def reconcile(self, key: Hashable) -> float | None:
        if len(key) == 3 and key[0] == ORPHAN:
            self._release_orphan(key[1], key[2])
            return None
        namespace, name = key
        job = self.client.get("Job", namespace, name)
        pods = [p for k, p in self.client.dependents(job["metadata"]["uid"]) if k == "Pod"] if job else []
        if job is None:
            return None
        if job["metadata"].get("deletionTimestamp"):
            for pod in pods:
                if terminal(pod) or pod["metadata"].get("deletionTimestamp"):
                    self._release(pod)
            return None
        before = copy.deepcopy(job.get("status"))
        status = job.setdefault("status", {})
        found = status.setdefault("conditions", [])
        now = self.client.now()
        again = None
        if not (conditions.is_true(found, "Complete") or conditions.is_true(found, "Failed")):
            job, before = self._track(job, pods, before)
            again = self._sync(job, pods, now)
        else:
            for pod in pods:
                if terminal(pod):
                    self._release(pod)
        if not status.get("conditions"):
            status.pop("conditions")
        if status != before:
            self.client.update_status("Job", job)
        return again

    def _track(self, job: Obj, pods: list[Obj], before: Obj | None) -> tuple[Obj, Obj | None]:
        """trackJobStatusAndRemoveFinalizers: a pod that ended is first recorded in
        status.uncountedTerminatedPods (and an Indexed Job's completedIndexes), stored; only then
        is its finalizer removed; and only a recorded pod whose finalizer is gone is moved into
        succeeded or failed. Whichever of these writes fails (a conflict, a full disk), the next
        look counts each pod exactly once: never lost (and its pod made again, beyond
        backoffLimit), never twice. Returns the Job (as stored, when step one wrote it) and the
        status it was read with."""
        status = job["status"]
        indexed = job["spec"].get("completionMode") == "Indexed"
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        succeeded_indexes = parse_ranges(status.get("completedIndexes"))
        recorded = False
        for pod in pods:
            if TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []):
                continue
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Succeeded":
                outcome = "succeeded"
                if indexed and _index(pod) is not None:
                    succeeded_indexes.add(_index(pod))
            elif phase == "Failed" or pod["metadata"].get("deletionTimestamp"):
                outcome = "failed"
            else:
                continue
            uids = uncounted.setdefault(outcome, [])
            if pod["metadata"]["uid"] not in uids:
                uids.append(pod["metadata"]["uid"])
                recorded = True
        if indexed:
            status["completedIndexes"] = index_ranges(succeeded_indexes)
            if not status["completedIndexes"]:
                status.pop("completedIndexes")
        if recorded:
            job = self.client.update_status("Job", job)
            before = copy.deepcopy(job["status"])
            status, uncounted = job["status"], job["status"]["uncountedTerminatedPods"]
        held = {p["metadata"]["uid"]: p for p in pods if TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])}
        for outcome in ("succeeded", "failed"):
            for uid in list(uncounted.get(outcome) or []):
                if uid in held:
                    self._release(held[uid])
                status[outcome] = int(status.get(outcome, 0)) + 1
                uncounted[outcome].remove(uid)
            if not uncounted.get(outcome):
                uncounted.pop(outcome, None)
        return job, before

    def _sync(self, job: Obj, pods: list[Obj], now: str) -> float | None:
        spec, status = job["spec"], job["status"]
        found = status["conditions"]
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        succeeded_indexes = parse_ranges(status.get("completedIndexes"))
        live = [p for p in pods if not terminal(p) and not p["metadata"].get("deletionTimestamp")]
        ending = [p for p in pods if not terminal(p) and p["metadata"].get("deletionTimestamp")]
        ended = self._ending(job, live, succeeded_indexes, now)
        if ended is not None:  # FailureTarget or SuccessCriteriaMet: the rest go, then the end is told
            target, final, reason, message = ended
            if conditions.set_condition(found, target, "True", reason, message, now):
                self.record(job, "Warning" if final == "Failed" else "Normal", reason, message)
            for pod in live:
                self._delete_pod(job, pod)
            if not live and not ending:
                conditions.set_condition(found, final, "True", reason, message, now)
                if final == "Complete":
                    status["completionTime"] = now
                    self.record(job, "Normal", "Completed", "Job completed")
            self._counts(status, live, ending)
            return None
        if spec.get("suspend"):
            for pod in live:
                self._delete_pod(job, pod)
            if conditions.set_condition(found, "Suspended", "True", "JobSuspended", "Job suspended", now):
                self.record(job, "Normal", "Suspended", "Job suspended")
            status.pop("startTime", None)
            self._counts(status, [], ending)
            return None
        if conditions.is_true(found, "Suspended"):
            conditions.set_condition(found, "Suspended", "False", "JobResumed", "Job resumed", now)
            self.record(job, "Normal", "Resumed", "Job resumed")
        status.setdefault("startTime", now)
        live += self._create_pods(job, live, ending, succeeded_indexes, completions, indexed)
        self._counts(status, live, ending)
        deadline = spec.get("activeDeadlineSeconds")
        if deadline:
            started = parse_time(status["startTime"]) or self.clock()
            return max(0.0, started + float(deadline) - self.clock()) + 0.01
        return None

    def _ending(self, job: Obj, live: list[Obj], succeeded: set[int], now: str) -> tuple[str, str, str, str] | None:
        spec, status = job["spec"], job["status"]
        found = status["conditions"]
        for target, final in (("FailureTarget", "Failed"), ("SuccessCriteriaMet", "Complete")):
            existing = conditions.find(found, target, "True")
            if existing is not None:
                return target, final, existing["reason"], existing["message"]
        limit = int(spec.get("backoffLimit", 6))
        if int(status.get("failed", 0)) > limit or _past_backoff_on_failure(spec, live, limit):
            return ("FailureTarget", "Failed", *BACKOFF_LIMIT)
        deadline, started = spec.get("activeDeadlineSeconds"), parse_time(status.get("startTime"))
        if deadline and started is not None and self.clock() >= started + float(deadline):
            return ("FailureTarget", "Failed", *DEADLINE)
        completions = spec.get("completions")
        if completions is not None:
            done = len(succeeded) if spec.get("completionMode") == "Indexed" else int(status.get("succeeded", 0))
            if done >= int(completions):
                return ("SuccessCriteriaMet", "Complete", *COMPLETED)
        return None

    @staticmethod
    def _counts(status: Obj, live: list[Obj], ending: list[Obj]) -> None:
        status["active"] = len(live)
        status["ready"] = sum(1 for p in live if conditions.is_true((p.get("status") or {}).get("conditions"),
                                                                     "Ready"))
        status["terminating"] = len(ending)
        for field in ("succeeded", "failed"):
            status.setdefault(field, 0)

    # ------------------------------------------------------------------ pods

    def _create_pods(self, job: Obj, live: list[Obj], ending: list[Obj], succeeded: set[int],
                     completions: int | None, indexed: bool) -> list[Obj]:
        parallelism = int(job["spec"].get("parallelism", 1))
        room = parallelism - len(live)
        if room <= 0:
            return []
        created = []
        if indexed:
            busy = {_index(p) for p in live + ending}
            wanted = [i for i in range(int(completions or 0)) if i not in succeeded and i not in busy]
        else:
            left = (int(completions) - int(job["status"].get("succeeded", 0)) - len(live)) if completions else room
            wanted = [None] * max(0, min(left, room))
        for index in wanted[:room]:
            pod = self.client.create("Pod", pod_from_template(job, index))
            self.record(job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
            created.append(pod)
        return created

    def _delete_pod(self, job: Obj, pod: Obj) -> None:
        """deleteJobPods: its finalizer goes first, so a pod the Job itself ends (suspended, or
        the rest of a failed group) is never counted as a failure of the Job."""
        meta = pod["metadata"]
        self._release(pod)
        self.client.delete("Pod", meta["namespace"], meta["name"], uid=meta["uid"])
        self.record(job, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")

    def _release(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if TRACKING_FINALIZER not in (meta.get("finalizers") or []):
            return

        def release(p: Obj) -> None:
            left = [f for f in p["metadata"].get("finalizers") or [] if f != TRACKING_FINALIZER]
            if left:
                p["metadata"]["finalizers"] = left
            else:
                p["metadata"].pop("finalizers", None)
        self.client.mutate("Pod", meta["namespace"], meta["name"], release)


def _past_backoff_on_failure(spec: Obj, live: list[Obj], limit: int) -> bool:
    """pastBackoffLimitOnFailure: with restartPolicy OnFailure a failure restarts the container in
    place; the restarts of the running pods count."""
    if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(int(c.get("restartCount", 0)) for p in live
                   for c in (p.get("status") or {}).get("containerStatuses") or [])
    return restarts > 0 if limit == 0 else restarts >= limit


def pod_from_template(job: Obj, index: int | None) -> Obj:
    """A pod of the Job (its template; the index's name, labels, hostname and env when Indexed)."""
    meta = job["metadata"]
    template = copy.deepcopy(job["spec"].get("template") or {})
    pod_meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    labels, annotations = dict(pod_meta.get("labels") or {}), dict(pod_meta.get("annotations") or {})
    prefix = f"{meta['name']}-"
    if index is not None:
        labels[INDEX] = annotations[INDEX] = str(index)
        prefix = f"{meta['name']}-{index}-"
        spec["hostname"] = f"{meta['name']}-{index}"
        for container in spec.get("containers") or []:
            env = container.setdefault("env", [])
            if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                env.insert(0, {"name": "JOB_COMPLETION_INDEX",
                               "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": INDEX_FIELD_PATH}}})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": prefix, "namespace": meta["namespace"], "labels": labels,
                         "annotations": annotations, "finalizers": [TRACKING_FINALIZER],
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": spec}
