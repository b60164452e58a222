"""The controller as the Trainer's (and KubeRay's) controller: what stored runtimes and jobs
declare, made to happen. A runner per TrainJob and RayJob (runner.py, jobs.py, rayjobs.py):
checked at admission, started, suspended, deleted, and at start recovered from its status file
(or, unreadable, planned again from its spec: the workers resume from their checkpoints). Every
pod and job change a runner publishes is mirrored into the API (mirror.py). The warm workers'
zygote starts when a runtime arrives. A part of Controller (controller.py), sharing its state.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from typing import TYPE_CHECKING

import yaml

from backend.cluster import ClusterError, InvalidResource
from backend.local import bootstrap, objects, podspec, rayjobs
from backend.local.registry.status import ApiError
from backend.local.events import EventLog
from backend.local.jobs import JobRunner
from backend.local.layout import Layout
from backend.local.runner import Runner
from backend.local.warm import ZygotePool
from backend.models import (
    DEFAULT_RUNTIME,
    Condition,
    JobPhase,
    JobSummary,
    ManifestError,
    PersistentVolumeClaim,
    Pod,
    RayJob,
    TrainingRuntime,
    TrainJob,
    VolumeSnapshot,
    parse_resource,
)
from training.launch import ddp_command

if TYPE_CHECKING:
    from backend.local.api import ClusterApi

log = logging.getLogger("kfcockpit.controller")


class JobControl:
    # The controller's state these methods use, made in Controller.__init__:
    layout: Layout
    api: ClusterApi
    events: EventLog
    runners: dict[str, Runner]  # TrainJobs and RayJobs by name (one namespace)
    runtimes: dict[tuple[str, str], TrainingRuntime]
    claims: dict[str, PersistentVolumeClaim]
    snapshot_specs: dict[str, VolumeSnapshot]
    zygotes: ZygotePool | None

    # ------------------------------------------------------------------ desired state on disk

    def _load(self) -> None:
        """Objects from the API store (migrating a state root of the socket-only controller),
        then a runner for every job, recovered from its status file."""
        self.api.load()
        self._migrate_resource_files()
        for kind_name in ("TrainingRuntime", "ClusterTrainingRuntime", "PersistentVolumeClaim", "VolumeSnapshot"):
            for obj in self.api.store.all_of(self.api.kinds[kind_name]):
                try:
                    resource = parse_resource(obj, f"stored {kind_name}")
                except ManifestError as exc:
                    log.error("skipping %s: %s", obj["metadata"]["name"], exc)
                    continue
                if isinstance(resource, TrainingRuntime):
                    self.runtimes[(resource.kind, resource.metadata.name)] = resource
                elif isinstance(resource, PersistentVolumeClaim):
                    if (obj.get("status") or {}).get("phase") != "Pending":  # Pending: its dataSource was not usable
                        self.claims[resource.metadata.name] = resource
                else:
                    self.snapshot_specs[resource.metadata.name] = resource
        for kind_name in ("TrainJob", "RayJob"):
            for obj in list(self.api.store.all_of(self.api.kinds[kind_name])):
                if (obj.get("spec") or {}).get("suspend"):
                    continue
                try:
                    job = parse_resource(obj, f"stored {kind_name}")
                    self.runners[job.metadata.name] = self._runner_from_status(job)
                except (ClusterError, ManifestError) as exc:
                    log.error("%s %s not recovered: %s", kind_name, obj["metadata"]["name"], exc)

    def _migrate_resource_files(self) -> None:
        """resources/<Kind>/<name>.yaml of an earlier version become stored objects, once."""
        for kind_dir in sorted(self.layout.resources.glob("*")):
            for path in sorted(kind_dir.glob("*.yaml")):
                try:
                    bootstrap.create_missing(self.api, yaml.safe_load(path.read_text()))
                except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError, ApiError) as exc:
                    log.error("not migrated: %s: %s", path, exc)
                    continue
                path.unlink()

    def _runner_from_status(self, job: TrainJob | RayJob) -> Runner:
        path = self.layout.job_status_file(job.metadata.name)
        if isinstance(job, RayJob):
            try:
                data = json.loads(path.read_text())
                return rayjobs.runner_from_status(self, job, data)
            except (OSError, ValueError, KeyError, TypeError):
                return rayjobs.runner_from_status(self, job, None)
        try:
            data = json.loads(path.read_text())
            summary = JobSummary.model_validate(data["summary"])
            plan = podspec.JobPlan.from_json(data["plan"])
            pods = [Pod.model_validate(p) for p in data["pods"]]
            return JobRunner(self, job, plan, summary, pods, data.get("logs"))
        except (OSError, ValueError, KeyError, TypeError):
            # No readable status (it is not fsynced: a machine crash can lose it): start over
            # from the spec; the workers resume from the checkpoints on the volume.
            runtime = self.runtimes.get((job.spec.runtime_ref.kind, job.spec.runtime_ref.name))
            if runtime is None:
                raise InvalidResource(f"TrainJob {job.metadata.name}: its runtime is gone") from None
            return self._new_runner(job, podspec.plan_job(job, runtime, self.api.resolver(job.metadata.namespace)))

    def _new_runner(self, job: TrainJob, plan: podspec.JobPlan) -> JobRunner:
        summary = JobSummary(
            name=plan.name, phase=JobPhase.CREATED, num_nodes=plan.num_nodes, max_restarts=plan.max_restarts,
            created=time.time(), volumes=[claim for claim, _ in plan.mounts],
            conditions=[Condition(type="Created", status="True", reason="JobsCreationSucceeded",
                                  message="the worker group is being created")],
        )
        return JobRunner(self, job, plan, summary)

    # ------------------------------------------------------------------ what stored objects declare
    # (called by the API's hooks, backend/local/api.py, after admission stored the object)

    def runtime_applied(self, runtime: TrainingRuntime) -> None:
        self.runtimes[(runtime.kind, runtime.metadata.name)] = runtime
        self.prewarm(runtime)  # a job usually follows its runtime: have the workers warm by then

    def check_job(self, job: TrainJob | RayJob) -> None:
        """Admission: ApiError 422 for a job none of whose pods could run."""
        if isinstance(job, RayJob):
            try:
                rayjobs.check(self, job)
            except InvalidResource as exc:
                raise ApiError(422, "Invalid", f'RayJob.ray.io "{job.metadata.name}" is invalid: {exc}') from None
            return
        ref = job.spec.runtime_ref
        runtime = self.runtimes.get((ref.kind, ref.name))
        if runtime is None:
            return  # the webhook's rule answers that one
        try:
            podspec.check_plan(job, runtime)
        except InvalidResource as exc:
            raise ApiError(422, "Invalid", f'TrainJob.trainer.kubeflow.org "{job.metadata.name}" is invalid: '
                                           f"{exc}") from None

    async def start_job(self, job: TrainJob | RayJob) -> None:
        name = job.metadata.name
        if isinstance(job, RayJob):
            runner = rayjobs.new_runner(self, job)
        else:
            ref = job.spec.runtime_ref
            runtime = self.runtimes.get((ref.kind, ref.name))
            if runtime is None:
                raise InvalidResource(f"TrainJob {name}: {ref.kind} {ref.name!r} not found; apply it first "
                                      "(kubectl apply -f manifests/runtime.yaml)")
            runner = self._new_runner(job, podspec.plan_job(job, runtime, self.api.resolver(job.metadata.namespace)))
        self.layout.job_status_file(name).unlink(missing_ok=True)
        runner.persist()  # status first: a job on disk always has one to recover from
        self.runners[name] = runner
        self.events.publish("jobs", "ADDED", runner.summary.model_dump(mode="json"), name)
        runner.start()

    async def stop_job(self, name: str) -> None:
        """Suspend: the pods go, the job stays (it resumes from its checkpoints)."""
        runner = self.runners.pop(name, None)
        if runner is not None:
            await runner.stop()
            for pod in runner.pods():
                self.events.publish("pods", "DELETED", pod.model_dump(mode="json"), name)
            self.layout.job_status_file(name).unlink(missing_ok=True)

    async def delete_job(self, kind: str, name: str) -> None:
        runner = self.runners.get(name)
        if runner is not None:
            await runner.stop()
            for pod in runner.pods():
                self.events.publish("pods", "DELETED", pod.model_dump(mode="json"), name)
            self.runners.pop(name, None)  # a second delete may have raced this one
            self.events.publish("jobs", "DELETED", runner.summary.model_dump(mode="json"), name)
        self.layout.job_status_file(name).unlink(missing_ok=True)
        shutil.rmtree(self.layout.logs / name, ignore_errors=True)
        shutil.rmtree(self.layout.root / "projected" / name, ignore_errors=True)

    def idle_summary(self, obj: dict) -> JobSummary:
        """The status of a job that has no runner (created suspended)."""
        return JobSummary(name=obj["metadata"]["name"], phase=JobPhase.CREATED,
                          num_nodes=int(((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or 1),
                          created=time.time())

    def _mirror(self, kind: str, event_type: str, obj: dict, job: str | None) -> None:
        """Runner changes → the API's Pod, TrainJob status and JobSet objects."""
        try:
            if kind == "pods":
                runner = self.runners.get(obj["job"])
                self.api.mirror.pod_changed(event_type, Pod.model_validate(obj), objects.pod_spec(runner))
            elif kind == "jobs":
                self.api.mirror.job_changed(event_type, JobSummary.model_validate(obj))
        except ApiError as exc:  # the object was deleted meanwhile
            log.debug("mirror of %s %s skipped: %s", kind, event_type, exc)
        except Exception:  # noqa: BLE001 - a bug in the mirror must not fail the job it mirrors
            log.exception("mirror of %s %s failed", kind, event_type)

    def prewarm(self, runtime: TrainingRuntime | None = None) -> None:
        """Start the zygote for a runtime's pods now, so they do not wait for torch to import.
        Started on demand (cluster up or Embedded.warm, a runtime applied), not with every
        controller: most controllers only answer a few reads, and the import costs seconds of CPU."""
        runtime = runtime or self.runtimes.get(("TrainingRuntime", DEFAULT_RUNTIME))
        env = {"OMP_NUM_THREADS": "1"}
        if runtime is not None:
            env = {e["name"]: str(e["value"]) for e in runtime.trainer_container().get("env") or []
                   if isinstance(e, dict) and e.get("value") is not None}
        # A plan of the training command, so the zygote is the one its warm pods will ask for.
        plan = podspec.JobPlan(name="prewarm", num_nodes=1, num_proc_per_node=1, max_restarts=0, image="",
                               command=ddp_command(), args=[], env=env, mounts=[])
        spec = podspec.launch_spec(plan, 0, 0, "prewarm", self.layout.root, {})
        self.zygotes.get(spec.zygote_key)
