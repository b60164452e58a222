"""The Trainer's TrainJob controller (kubeflow/trainer v2.3 pkg/controller/trainjob_controller.go
with the runtime framework's jobset and torch plugins): a TrainJob and its (Cluster)TrainingRuntime
become a JobSet, and the JobSet's state becomes the TrainJob's.

The JobSet is the runtime's template with the TrainJob's runtimePatches merged in (a strategic
merge, replicated jobs kept in the runtime's order: registry/upstream/trainer.py), then the TrainJob's own
settings on the replicated job labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`:
numNodes as its parallelism and completions, the `node` container's image, command, args, env
and resourcesPerNode, and the torch plugin's PET_* variables (PET_NODE_RANK from the pod's
completion index, PET_MASTER_ADDR the first pod's DNS name `<job>-node-0-0.<job>`, port 29500).
The cockpit's own annotation `kfcockpit.io/warm-start` on the TrainJob reaches its pods; with the
TrainJobStatus gate on, the trainer containers learn where to report progress (trainjob_status.py).
It is owned by the TrainJob and built once; built again only while either is suspended, as the
jobset plugin's Build does. A runtime that is missing, or a JobSet that cannot be made (its
webhook or validation refuses what the runtimePatches built), leaves a Warning Event
TrainJobResourcesCreationFailed with the error, and a retry with a back-off (v2.3.0 sets no
condition for it).

Status: the JobSet's Completed and Failed conditions as Complete and Failed, jobsStatus from its
replicatedJobsStatus, Suspended True while suspended and False (Resumed) after;
activeDeadlineSeconds past its start (or its resumption) fails it (DeadlineExceeded) and deletes
the JobSet.
"""

from __future__ import annotations

import copy
from typing import Callable, Hashable

from backend.local.controllers import conditions, trainjob_status
from backend.local.controllers.apply import upsert
from backend.local.controllers.base import Controller, namespaced_key, owner_key
from backend.local.registry.events import Record
from backend.local.controllers.job import INDEX_FIELD_PATH, parse_time
from backend.local.registry.client import Client
from backend.local.registry.upstream import trainer as trainer_rules
from backend.local.registry.merge import strategic_merge
from backend.local.registry.status import ApiError
from backend.local.registry.strategies.pods import WARM_ANNOTATION
from backend.local.registry.strategy import Obj

API = "trainer.kubeflow.org/v1alpha1"
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER = "node"  # the trainer's replicated job and container
MASTER_PORT = 29500  # constants.ContainerTrainerPort
SUSPENDED = ("Suspended", "TrainJob is suspended")
RESUMED = ("Resumed", "TrainJob is resumed")
DEADLINE = ("DeadlineExceeded", "TrainJob exceeded its active deadline")


def runtime_of(client: Client, trainjob: Obj) -> Obj | None:
    ref = trainjob["spec"].get("runtimeRef") or {}
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    if kind not in ("TrainingRuntime", "ClusterTrainingRuntime"):
        return None
    return client.get(kind, trainjob["metadata"]["namespace"] if kind == "TrainingRuntime" else None,
                      ref.get("name", ""))


def build_jobset(trainjob: Obj, runtime: Obj, status: trainjob_status.StatusServer | None = None) -> Obj:
    """The JobSet the Trainer makes of `trainjob` on `runtime` (with the TrainJobStatus plugin's
    env and volume when a `status` server runs)."""
    meta, spec = trainjob["metadata"], trainjob["spec"]
    template = (runtime.get("spec") or {}).get("template") or {}
    jobset_spec = trainer_rules.merged_runtime_spec(runtime, trainjob)
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    for patch in spec.get("runtimePatches") or []:
        patched = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {})
        labels.update((patched.get("metadata") or {}).get("labels") or {})
        annotations.update((patched.get("metadata") or {}).get("annotations") or {})
    trainer = spec.get("trainer") or {}
    policy = (runtime.get("spec") or {}).get("mlPolicy") or {}
    nodes = int(trainer.get("numNodes") or policy.get("numNodes") or 1)
    for rjob in jobset_spec["replicatedJobs"]:
        job_template = rjob.setdefault("template", {})
        if ((job_template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR) != "trainer":
            continue
        rjob["replicas"] = 1
        job_spec = job_template.setdefault("spec", {})
        if WARM_ANNOTATION in (meta.get("annotations") or {}):
            pod_meta = job_spec.setdefault("template", {}).setdefault("metadata", {})
            pod_meta.setdefault("annotations", {})[WARM_ANNOTATION] = meta["annotations"][WARM_ANNOTATION]
        job_spec["parallelism"] = job_spec["completions"] = nodes
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        for container in pod_spec.get("containers") or []:
            if container.get("name") == TRAINER:
                procs = trainer_rules.trainjob_num_proc_per_node(trainjob, runtime) if "torch" in policy else None
                _trainer_container(container, trainjob, nodes, procs)
        if status is not None:
            trainjob_status.enforce(pod_spec, pod_spec.get("containers") or [], trainjob, status)
    jobset_spec["suspend"] = bool(spec.get("suspend"))
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels,
                         "annotations": annotations,
                         "ownerReferences": [{"apiVersion": API, "kind": "TrainJob", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": jobset_spec}


def _trainer_container(container: Obj, trainjob: Obj, nodes: int, procs: str | None) -> None:
    """The `node` container as the jobset plugin's Trainer() and the torch plugin leave it:
    `procs` is PET_NPROC_PER_NODE (None without the torch policy)."""
    name, trainer = trainjob["metadata"]["name"], trainjob["spec"].get("trainer") or {}
    for field in ("image", "command", "args"):
        if trainer.get(field) is not None:
            container[field] = copy.deepcopy(trainer[field])
    per_node = trainer.get("resourcesPerNode")
    if per_node:
        resources = container.setdefault("resources", {})
        for field in ("requests", "limits"):
            if per_node.get(field):
                resources[field] = {**(resources.get(field) or {}), **per_node[field]}
    env = upsert(container.get("env") or [], trainer.get("env") or [])
    if procs is not None:
        env = upsert(env, [
            {"name": "PET_NNODES", "value": str(nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": str(procs)},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": INDEX_FIELD_PATH}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-{TRAINER}-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
        ])
    container["env"] = env


class TrainJobController(Controller):
    name = "trainjob-controller"

    def __init__(self, client: Client, record: Record, clock: Callable[[], float],
                 status_server: Callable[[], trainjob_status.StatusServer | None] = lambda: None):
        """`status_server()`: where the Trainer's status server listens (TrainJobStatus on), once
        it does."""
        super().__init__(client)
        self.record, self.clock, self.status_server = record, clock, status_server
        self.trainjobs = self.inform("TrainJob", lambda _t, obj, _o: self.queue.add(namespaced_key(obj)))
        self.inform("JobSet", self._jobset_changed)
        for kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
            self.inform(kind, self._runtime_changed)

    def _jobset_changed(self, event_type: str, jobset: Obj, old: Obj | None) -> None:
        key = owner_key(jobset, "TrainJob")
        if key is not None:
            self.queue.add(key)

    def _runtime_changed(self, event_type: str, runtime: Obj, old: Obj | None) -> None:
        """A runtime that arrives late lets the TrainJobs waiting for it go on."""
        for trainjob in self.trainjobs.items():
            ref = trainjob["spec"].get("runtimeRef") or {}
            if ref.get("name") == runtime["metadata"]["name"] and ref.get("kind") == runtime["kind"]:
                self.queue.add(namespaced_key(trainjob))

    async def reconcile(self, key: Hashable) -> float | None:
        namespace, name = key
        trainjob = self.client.get("TrainJob", namespace, name)
        if trainjob is None or trainjob["metadata"].get("deletionTimestamp"):
            return None
        if trainjob["spec"].get("managedBy", MANAGED_BY) != MANAGED_BY:
            return None
        before = copy.deepcopy(trainjob.get("status"))
        status = trainjob.setdefault("status", {})
        found = status.setdefault("conditions", [])
        jobset = self.client.get("JobSet", namespace, name)
        if not (conditions.is_true(found, "Complete") or conditions.is_true(found, "Failed")):
            try:
                jobset = self._reconcile_jobset(trainjob, jobset)
            except ApiError as exc:  # said on the TrainJob, then retried with a back-off (base.py)
                if exc.code != 409:  # a write that raced another: upstream's forced apply has none
                    self._creation_failed(trainjob, exc.message)
                raise
        now = self.client.now()
        if trainjob["spec"].get("suspend"):
            conditions.set_condition(found, "Suspended", "True", *SUSPENDED, now)
        elif conditions.is_true(found, "Suspended"):
            conditions.set_condition(found, "Suspended", "False", *RESUMED, now)
        if jobset is not None:
            self._status_from(jobset, status)
        again = self._deadline(trainjob, now)
        if not status.get("conditions"):
            status.pop("conditions")
        if status != before:
            self.client.update_status("TrainJob", trainjob)
        return again

    def _reconcile_jobset(self, trainjob: Obj, jobset: Obj | None) -> Obj | None:
        suspended = bool(trainjob["spec"].get("suspend"))
        if jobset is not None and not suspended and not (jobset.get("spec") or {}).get("suspend"):
            return jobset  # built once; only a suspended one is built again
        runtime = runtime_of(self.client, trainjob)
        if runtime is None:
            ref = trainjob["spec"].get("runtimeRef") or {}
            self._creation_failed(trainjob, f"{ref.get('kind')} {ref.get('name')!r} not found")
            return jobset
        status = self.status_server()
        wanted = build_jobset(trainjob, runtime, status)
        if jobset is None:
            if status is not None and self.client.get("ConfigMap", trainjob["metadata"]["namespace"],
                                                      trainjob_status.config_map_name(trainjob)) is None:
                self.client.create("ConfigMap", trainjob_status.ca_config_map(trainjob, status))
            return self.client.create("JobSet", wanted)
        # Applied over what is there, as server-side apply merges it: fields others set (the
        # JobSet's own defaults) stay. A running JobSet only learns that it is suspended.
        spec = strategic_merge(jobset["spec"], wanted["spec"]) if jobset["spec"].get("suspend") else \
            {**jobset["spec"], "suspend": True}
        if spec != jobset["spec"]:
            jobset["spec"] = spec
            return self.client.update("JobSet", jobset)
        return jobset

    def _creation_failed(self, trainjob: Obj, error: str) -> None:
        """TrainJobReconciler.Reconcile's Warning when reconcileObjects fails (v2.3.0 sets no
        condition for it): the error cut at 950 characters, to stay within an Event's 1024."""
        message = f"TrainJob resources reconciliation failed: {error[:950]}"
        self.record(trainjob, "Warning", "TrainJobResourcesCreationFailed",
                    f"{message} ..." if len(error) > 950 else message)

    @staticmethod
    def _status_from(jobset: Obj, status: Obj) -> None:
        """The jobset plugin's Status: Completed -> Complete, Failed -> Failed, jobsStatus."""
        found = status["conditions"]
        set_conditions = (jobset.get("status") or {}).get("conditions") or []
        for theirs, ours in (("Completed", "Complete"), ("Failed", "Failed")):
            condition = conditions.find(set_conditions, theirs, "True")
            if condition is not None:
                conditions.set_condition(found, ours, "True", condition.get("reason", ""),
                                         condition.get("message", ""), condition.get("lastTransitionTime", ""))
        status["jobsStatus"] = [{"name": s["name"], "ready": s.get("ready", 0), "succeeded": s.get("succeeded", 0),
                                 "failed": s.get("failed", 0), "active": s.get("active", 0),
                                 "suspended": s.get("suspended", 0)}
                                for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or []]

    def _deadline(self, trainjob: Obj, now: str) -> float | None:
        seconds = trainjob["spec"].get("activeDeadlineSeconds")
        found = trainjob["status"]["conditions"]
        if not seconds or trainjob["spec"].get("suspend") or conditions.is_true(found, "Complete") \
                or conditions.is_true(found, "Failed"):
            return None
        resumed = conditions.find(found, "Suspended", "False")
        start = parse_time((resumed or {}).get("lastTransitionTime") or trainjob["metadata"].get("creationTimestamp"))
        if start is None:
            return None
        left = start + float(seconds) - self.clock()
        if left > 0:
            return left + 0.01
        conditions.set_condition(found, "Failed", "True", *DEADLINE, now)
        meta = trainjob["metadata"]
        self.client.delete("JobSet", meta["namespace"], meta["name"])
        return None
