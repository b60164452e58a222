"""The mirror: what the embedded cluster's runners observe, as the objects a client reads.

Every pod and job change a runner publishes (controller.py's EventLog listener) becomes a core/v1
Pod, the TrainJob's status and its JobSet (shapes in objects.py), and the Events a user looks for
(Scheduled, Started, Killing, Failed, FailedScheduling, JobSetCreated, Restarting, Complete).
"""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING, Any

from backend.local import objects
from backend.local.registry.kinds import Kind
from backend.models import JobSummary, Pod

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

EVENTS_KEPT = 2000  # Events are this run's history (not stored): the oldest go first


class Mirror:
    def __init__(self, api: "ClusterApi"):
        self.api = api
        self._events: list[tuple[str, str]] = []
        self.deleted_pods: set[str] = set()  # deleted through the API, until their runner lets go

    def mirror_all(self) -> None:
        """Pods, JobSets and job status of the recovered runners (pods are not stored on disk)."""
        for runner in self.api.ctl.runners.values():
            self.job_changed("ADDED", runner.summary)
            for pod in runner.pods():
                self.pod_changed("ADDED", pod, objects.pod_spec(runner))

    def _job_object(self, job: str) -> tuple[Kind, dict[str, Any]] | None:
        for kind_name in ("TrainJob", "RayJob"):
            kind = self.api.kinds[kind_name]
            for obj in self.api.store.all_of(kind):
                if obj["metadata"]["name"] == job:
                    return kind, obj
        return None

    def pod_changed(self, event_type: str, pod: Pod, spec: dict[str, Any]) -> None:
        kind = self.api.kinds["Pod"]
        found = self._job_object(pod.job)
        namespace = found[1]["metadata"]["namespace"] if found else "default"
        live = self.api.store.find(kind, namespace, pod.name)
        if event_type == "DELETED":
            self.deleted_pods.discard(pod.name)
            if live is not None:
                self.api.store.delete(kind, namespace, pod.name)
            return
        if pod.name in self.deleted_pods:
            if pod.phase.finished and live is not None:  # Terminating until its process ended
                self.api.store.delete(kind, namespace, pod.name)
            return
        if found is None:
            return  # the job is being deleted
        job_kind, job_obj = found
        owner_obj = (self.api.store.find(self.api.kinds["JobSet"], namespace, pod.job)
                     if job_kind.kind == "TrainJob" else job_obj)
        obj = objects.pod_object(pod, namespace, objects.owner(owner_obj) if owner_obj else None, spec)
        was_unschedulable = live is not None and not (live.get("spec") or {}).get("nodeName")
        if live is None:
            self.api.store.create(kind, obj)
        else:
            obj["metadata"]["uid"] = live["metadata"]["uid"]
            self.api.store.update(kind, obj)
        if pod.reason == "Unschedulable" and pod.phase.value == "Pending":
            self.event(obj, "Warning", "FailedScheduling", pod.message, "default-scheduler")
        elif live is None or was_unschedulable:
            self.event(obj, "Normal", "Scheduled", f"Successfully assigned {namespace}/{pod.name} to "
                                                   f"{socket.gethostname()}", "default-scheduler")
        if live is not None and (live.get("status") or {}).get("phase") != pod.phase.value:
            self._pod_phase_event(obj, pod)

    def _pod_phase_event(self, obj: dict[str, Any], pod: Pod) -> None:
        if pod.phase.value == "Running":
            self.event(obj, "Normal", "Started", "Started container node (a process on this machine)", "kubelet")
        elif pod.phase.value == "Failed":
            self.event(obj, "Warning", "Failed" if pod.reason != "Killed" else "Killing",
                       f"container node ended: {pod.reason or 'Error'} (exit code {pod.exit_code})", "kubelet")
        elif pod.phase.value == "Succeeded":
            self.event(obj, "Normal", "Completed", "container node exited with code 0", "kubelet")

    def job_changed(self, event_type: str, summary: JobSummary) -> None:
        found = self._job_object(summary.name)
        if found is None or event_type == "DELETED":
            return
        kind, obj = found
        namespace = obj["metadata"]["namespace"]
        if kind.kind == "TrainJob":
            jobset_kind = self.api.kinds["JobSet"]
            jobset = objects.jobset_object(summary, namespace, obj)
            live_jobset = self.api.store.find(jobset_kind, namespace, summary.name)
            if live_jobset is None:
                self.api.store.create(jobset_kind, jobset)
                self.event(obj, "Normal", "JobSetCreated", f"JobSet {summary.name} created", "trainjob-controller")
            else:
                if live_jobset.get("status", {}).get("restarts", 0) < summary.restart_attempt:
                    self.event(jobset, "Warning", "Restarting", f"JobSet {summary.name} is restarting (attempt "
                               f"{summary.restart_attempt}): {summary.message}", "jobset-controller")
                self.api.store.update(jobset_kind, jobset)
            status = objects.trainjob_status(summary)
            was = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Suspended"),
                       None)
            if was is not None:  # trainer v2.3.0: Suspended turns False with reason Resumed
                resumed = {**was, "status": "False", "reason": "Resumed", "message": "TrainJob is resumed"}
                if was.get("status") == "True":
                    resumed["lastTransitionTime"] = objects.rfc3339(summary.created)
                status.setdefault("conditions", []).insert(0, resumed)
        else:
            status = objects.rayjob_status(summary)
        if summary.phase.finished and (obj.get("status") or {}) != status:
            self.event(obj, "Normal" if summary.phase.value == "Complete" else "Warning", summary.phase.value,
                       summary.message or summary.reason, "trainjob-controller")
        self.api.set_status(kind, obj, status)

    def event(self, involved: dict[str, Any], event_type: str, reason: str, message: str, component: str) -> None:
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        kind = self.api.kinds["Event"]
        now = objects.rfc3339(time.time())
        name = f"{meta['name']}.{self.api.store.rv + 1:x}"
        self.api.store.create(kind, {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"kind": involved["kind"], "apiVersion": involved["apiVersion"], "name": meta["name"],
                               "namespace": namespace, "uid": meta.get("uid", "")},
            "reason": reason, "message": message, "type": event_type, "count": 1,
            "source": {"component": component, "host": socket.gethostname()},
            "firstTimestamp": now, "lastTimestamp": now, "reportingComponent": component,
            "reportingInstance": socket.gethostname()})
        self._events.append((namespace, name))
        if len(self._events) > EVENTS_KEPT:
            old_ns, old_name = self._events.pop(0)
            if self.api.store.find(kind, old_ns, old_name) is not None:
                self.api.store.delete(kind, old_ns, old_name)
