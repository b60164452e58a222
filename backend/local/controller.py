"""The embedded cluster's controller: API server, scheduler and kubelet of one machine in one
asyncio process. Exactly one runs per state root (an fcntl lock); clients start it on demand.

    python -m backend.local.controller --home DIR --ready-fd N   (started by client.py)

It serves the Kubernetes API (apiserver/, tied to it by api.py) and, on a Unix socket, only its
own life cycle (client.py: ping, up, shutdown); keeps the API's objects and observed status as
JSON under the state root, and reconciles each TrainJob and RayJob (jobs.py, rayjobs.py). It is
single-threaded on purpose: pods are forked from it, and fork is only safe without other threads.

When a controller dies its pods die with it (PR_SET_PDEATHSIG). The next one kills any process
still marked with this state root, then recovers every unfinished job by the failure policy:
the lost group counts as a failure, so the job is recreated from its checkpoints (restart
attempt + 1) or, with its restarts used up, Failed. No worker is ever left behind unsupervised.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Callable

import yaml

from backend.cluster import ClusterError, InvalidResource, NotFound
from backend.local import objects, podspec, rayjobs, volumes
from backend.local.api import ClusterApi
from backend.local.barepods import BarePod
from backend.local.apiserver.status import ApiError
from backend.local.client import encode, read_message
from backend.local.events import EventLog
from backend.local.jobs import JobRunner
from backend.local.layout import Layout, socket_address
from backend.local.runner import Runner
from backend.local.scheduler import Scheduler
from backend.processes import (
    SpawnError,
    become_subreaper,
    marked_processes,
    reap_exited,
    spawn,
    sweep,
    wait_gone,
)
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

log = logging.getLogger("kfcockpit.controller")

# A controller with no unfinished job and no client connected exits after this many seconds (0:
# never); the next command starts one again. Keeps forgotten state roots from holding memory.
IDLE_ENV = "KFCOCKPIT_CONTROLLER_IDLE_EXIT"
DEFAULT_IDLE_EXIT = 600.0


class Controller:
    def __init__(self, layout: Layout):
        self.layout = layout
        self.events = EventLog()
        self.runners: dict[str, Runner] = {}  # TrainJobs and RayJobs by name (one namespace)
        self.runtimes: dict[tuple[str, str], TrainingRuntime] = {}
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.snapshot_specs: dict[str, VolumeSnapshot] = {}
        self.started = time.time()
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._stopping: asyncio.Event | None = None
        self.zygotes: ZygotePool | None = None
        self._clients = 0
        self._idle_timer: asyncio.TimerHandle | None = None
        self.idle_exit = float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_EXIT))
        capacity = node_capacity(layout)
        self.scheduler = Scheduler(capacity["cpu"], capacity["memory"], objects.MAX_PODS, self._unschedulable)
        self.api = ClusterApi(self, capacity)
        self.bare_pods: dict[str, BarePod] = {}  # "<namespace>.<name>" -> pods created through the API
        self._volume_waiters: list[asyncio.Future] = []  # pods waiting for a claim's volume
        self.events.listeners.append(self._mirror)

    # ------------------------------------------------------------------ processes

    def watch_exit(self, pid: int) -> asyncio.Future[int]:
        """A future with the wait status of our child `pid` (reaped on SIGCHLD, never polled)."""
        future = self._exits.get(pid)
        if future is None:
            future = self._exits[pid] = asyncio.get_running_loop().create_future()
        return future

    async def run_child(self, argv: list[str], output: Path | None = None) -> int:
        """Run a helper program of the controller's own (not a pod) and return its exit code;
        reaped by our SIGCHLD handler like every child. Its output goes to `output`, else nowhere."""
        fd = os.open(output or os.devnull, os.O_WRONLY | os.O_CLOEXEC | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            pid = spawn(argv, podspec.base_env(), podspec.PROJECT_ROOT, fd)
        except SpawnError as exc:
            log.warning("cannot run %s: %s", argv[0], exc)
            return 127
        finally:
            os.close(fd)
        return os.waitstatus_to_exitcode(await self.watch_exit(pid))

    def _reap(self) -> None:
        for pid, status in reap_exited():
            future = self._exits.pop(pid, None)
            if future is not None and not future.done():
                future.set_result(status)
            # Other pids are orphans of our pods re-parented to us (we are a subreaper): reaped.

    def _worker_exited(self, pod: str, status: int) -> None:
        for runner in self.runners.values():
            if runner.worker_exited(pod, status):
                return

    def mount_dirs(self, plan: podspec.JobPlan) -> dict[str, str]:
        """Mount path → the directory backing it: a PVC's volume, or the files of a ConfigMap or
        Secret volume written for this job (as the kubelet projects them)."""
        dirs = {mount: str(self.layout.volume_dir(claim)) for claim, mount in plan.mounts}
        resolve = self.api.resolver(getattr(plan, "namespace", "default"))
        for kind, name, mount in getattr(plan, "projected", []):
            data = resolve(kind, name)
            if data is None:
                raise InvalidResource(f"volume at {mount}: {kind.lower()} {name!r} not found "
                                      "(CreateContainerConfigError)")
            directory = self.layout.root / "projected" / plan.name / f"{kind.lower()}-{name}"
            volumes.project(directory, data)
            dirs[mount] = str(directory)
        return dirs

    def _sweep_leftovers(self) -> None:
        """Kill whatever a previous controller of this state root left running, and wait for it."""
        marker = {podspec.ENV_CLUSTER: str(self.layout.root)}
        pids = sweep(marker)
        if not pids:
            return
        log.warning("killed %d process(es) left by a previous controller: %s", len(pids), pids)
        wait_gone(pids, 10)
        left = list(marked_processes(marker))
        if left:
            log.error("processes of this state root still alive after SIGKILL: %s", left)

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
                    manifest = yaml.safe_load(path.read_text())
                    kind = self.api.registry.by_kind(manifest["apiVersion"], manifest["kind"])
                    meta = manifest.setdefault("metadata", {})
                    if kind.namespaced:
                        meta.setdefault("namespace", "default")
                    if self.api.store.find(kind, meta.get("namespace"), meta["name"]) is None:
                        self.api.store.create(kind, manifest)
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

    def claim_applied(self, claim: PersistentVolumeClaim) -> None:
        self.layout.volume_dir(claim.metadata.name).mkdir(parents=True, exist_ok=True)
        self.claims[claim.metadata.name] = claim
        self.volume_changed()

    def volume_changed(self) -> None:
        """A claim got its volume (or will not get it for now): the pods waiting look again."""
        waiters, self._volume_waiters = self._volume_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    async def wait_for_volumes(self, namespace: str, claims: list[str], waiting: Callable[[str], None]) -> None:
        """Return once every claim has its volume; until then `waiting(why)`, in the words of
        kube-scheduler's VolumeBinding plugin, which keeps such a pod Pending (a restore is
        being copied, its snapshot is not there yet, the claim does not exist)."""
        kind = self.api.kinds["PersistentVolumeClaim"]
        while missing := [c for c in claims if c not in self.claims]:
            unknown = [c for c in missing if self.api.store.find(kind, namespace, c) is None]
            why = f'persistentvolumeclaim "{unknown[0]}" not found' if unknown else \
                "pod has unbound immediate PersistentVolumeClaims"
            waiting(f"0/1 nodes are available: {why}. preemption: 0/1 nodes are available: "
                    "1 Preemption is not helpful for scheduling.")
            future = asyncio.get_running_loop().create_future()
            self._volume_waiters.append(future)
            await future

    async def fill_volume(self, name: str, source: Path) -> None:
        """The new volume `name` as a copy of `source` (a snapshot's data, another volume: its
        claim's dataSource). The copy is a child process (volumes.copy_command), so gigabytes
        never hold up this loop, into a temp directory renamed into place: the volume appears
        whole or not at all. InvalidResource in one line when the copy fails."""
        directory = self.layout.volume_dir(name)
        tmp = directory.with_name(f".{name}.tmp-{os.getpid()}")
        errors = tmp.with_name(f"{tmp.name}.err")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            tmp.mkdir(parents=True)
            code = await self.run_child(volumes.copy_command(source, tmp), output=errors)
            if code != 0:
                last = (errors.read_text(errors="replace").strip().splitlines() or [f"cp exited with {code}"])[-1]
                raise InvalidResource(f"copying its data source failed: {last}")
            volumes.drop_in_flight(tmp)
            os.rename(tmp, directory)
        except OSError as exc:
            raise InvalidResource(f"copying its data source failed: {exc.strerror or exc}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            errors.unlink(missing_ok=True)

    def take_snapshot(self, spec: VolumeSnapshot) -> dict:
        name, claim = spec.metadata.name, spec.spec.source.persistent_volume_claim_name
        if claim not in self.claims:
            raise NotFound(f"volume {claim!r} not found (apply its PersistentVolumeClaim first, "
                           "e.g. kubectl apply -f manifests/volume.yaml)")
        if self.layout.snapshot_dir(name).exists():
            raise InvalidResource(f"snapshot {name!r} already exists (delete it first: "
                                  f"kubectl delete volumesnapshot {name})")
        snap = volumes.create_snapshot(self.layout.volume_dir(claim), claim, self.layout.snapshot_dir(name))
        self.snapshot_specs[name] = spec
        return snap.model_dump(mode="json")

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

    def delete_claim(self, name: str) -> None:
        users = [r.name for r in self.runners.values()
                 if not r.summary.phase.finished and name in r.summary.volumes]
        if users:
            raise ApiError(409, "Conflict", f"persistentvolumeclaim {name!r} is in use by running job(s) "
                                            f"{', '.join(users)}; delete those first")
        shutil.rmtree(self.layout.volume_dir(name), ignore_errors=True)
        self.claims.pop(name, None)
        self.volume_changed()

    def delete_snapshot(self, name: str) -> None:
        self.snapshot_specs.pop(name, None)
        shutil.rmtree(self.layout.snapshot_dir(name), ignore_errors=True)

    def idle_summary(self, obj: dict) -> JobSummary:
        """The status of a job that has no runner (created suspended)."""
        return JobSummary(name=obj["metadata"]["name"], phase=JobPhase.CREATED,
                          num_nodes=int(((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or 1),
                          created=time.time())

    def _run_of(self, name: str):
        """(runner, run) of a job pod, or (None, None)."""
        for runner in self.runners.values():
            run = runner.runs.get(name)
            if run is not None:
                return runner, run
        return None, None

    def _running(self, name: str):
        """The run of a job pod whose process has not finished, or None."""
        _, run = self._run_of(name)
        return run if run is not None and run.finished is not None and not run.finished.done() else None

    def pod_finished(self, name: str) -> bool:
        _, run = self._run_of(name)
        return run is None or run.pod.phase.finished

    def pod_pid(self, name: str, namespace: str = "default") -> int | None:
        bare = self.bare_pods.get(f"{namespace}.{name}")
        if bare is not None:
            return bare.pid if bare.running() else None
        _, run = self._run_of(name)
        return getattr(run, "pid", None) if run is not None and not run.pod.phase.finished else None

    def _unschedulable(self, pod_name: str, why: str) -> None:
        runner, run = self._run_of(pod_name)
        if run is not None:
            run.pod.reason, run.pod.message = "Unschedulable", why
            runner._publish_pod(run.pod)

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

    def start_bare_pod(self, obj: dict) -> None:
        pod = BarePod(self, obj)
        self.bare_pods[pod.key] = pod
        pod.start()
        pod.task.add_done_callback(lambda _t: self.check_idle())

    def forget_bare_pod(self, key: str) -> None:
        pod = self.bare_pods.pop(key, None)
        if pod is not None:
            pod.log_path.unlink(missing_ok=True)

    def terminate_pod(self, name: str, grace: float) -> bool:
        """Graceful deletion: SIGTERM now, SIGKILL after `grace` seconds. False if not running."""
        run = self._running(name)
        if run is None:
            return False
        run.terminate()
        timer = asyncio.get_running_loop().call_later(grace, run.kill, str(self.layout.root))
        run.finished.add_done_callback(lambda _f: timer.cancel())
        return True

    def kill_pod(self, name: str) -> None:
        run = self._running(name)
        if run is not None:
            run.kill(str(self.layout.root))
            return
        raise NotFound(f"pod {name!r} not found or not running (see: kubectl get pods)")

    # ------------------------------------------------------------------ the life-cycle socket

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One request line, one reply line: ping, up or shutdown (client.py). Jobs, pods, logs
        and everything else go through the Kubernetes API."""
        self._clients += 1
        self.check_idle()
        try:
            request = await read_message(reader)
            if request is None:
                return
            op = request.get("op")
            try:
                reply = self._lifecycle(op)
            except Exception as exc:  # noqa: BLE001 - a bug, reported in one line, logged in full
                log.exception("request %s failed", op)
                reply = {"error": f"controller error in {op}: {type(exc).__name__}: {exc}"}
            writer.write(encode(reply))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()
            self._clients -= 1
            self.check_idle()

    def check_idle(self) -> None:
        """(Re)arm the idle exit when nothing runs and nobody is connected; disarm otherwise."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        busy = self._clients or any(not r.summary.phase.finished for r in self.runners.values()) \
            or any(p.running() for p in self.bare_pods.values()) \
            or (self.api.server is not None and self.api.server.open_streams > 0)
        if not busy and self.idle_exit > 0 and self._stopping is not None and not self._stopping.is_set():
            self._idle_timer = asyncio.get_running_loop().call_later(self.idle_exit, self._exit_idle)

    def _exit_idle(self) -> None:
        log.info("idle for %gs (no job running, no client): exiting; the next command starts a controller",
                 self.idle_exit)
        self._stopping.set()

    def _lifecycle(self, op: str | None) -> dict:
        if op == "ping":
            return {"pid": os.getpid(), "home": str(self.layout.home), "started": self.started,
                    "jobs": len(self.runners),
                    "pods_running": sum(p.phase.value == "Running" for r in self.runners.values() for p in r.pods()),
                    "warm": self.zygotes.status() if self.zygotes else []}
        if op == "up":
            self.prewarm()
            return self._lifecycle("ping")
        if op == "shutdown":
            asyncio.get_running_loop().call_soon(self._stopping.set)
            return {"ok": True, "pid": os.getpid()}
        return {"error": f"unknown operation {op!r}"}

    # ------------------------------------------------------------------ life cycle

    async def run(self, ready_fd: int | None) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        loop.add_signal_handler(signal.SIGCHLD, self._reap)
        loop.add_signal_handler(signal.SIGTERM, self._stopping.set)
        loop.add_signal_handler(signal.SIGINT, self._stopping.set)
        become_subreaper()
        self._sweep_leftovers()
        self._load()
        address, dir_fd = socket_address(self.layout.socket)
        self.layout.socket.unlink(missing_ok=True)  # a dead controller's; we hold the lock
        try:
            server = await asyncio.start_unix_server(self._handle, path=address)
        finally:
            if dir_fd is not None:
                os.close(dir_fd)
        log.info("controller %s serving %s", os.getpid(), self.layout.socket)
        self.api.mirror.mirror_all()
        await self.api.serve()
        self.zygotes = ZygotePool(self.layout.root, sys.stderr.fileno(), self.watch_exit, self._worker_exited)
        for runner in self.runners.values():
            if not runner.summary.phase.finished:
                runner.start()
        self.check_idle()
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
        await self._stopping.wait()
        log.info("controller %s stopping", os.getpid())
        await asyncio.gather(*(r.stop() for r in self.runners.values()), return_exceptions=True)
        for runner in self.runners.values():
            runner.persist()
        self.zygotes.stop()
        await self.api.close()
        server.close()
        self.layout.socket.unlink(missing_ok=True)

    def prewarm(self, runtime: TrainingRuntime | None = None) -> None:
        """Start the zygote for a runtime's pods now, so they do not wait for torch to import.
        Started on demand (cluster up, a runtime applied), not with every controller: most
        controllers only answer a few reads, and the import costs seconds of CPU."""
        runtime = runtime or self.runtimes.get(("TrainingRuntime", DEFAULT_RUNTIME))
        env = {"OMP_NUM_THREADS": "1"}
        if runtime is not None:
            env = {e["name"]: str(e["value"]) for e in runtime.trainer_container().get("env") or []
                   if isinstance(e, dict) and e.get("value") is not None}
        plan = podspec.JobPlan(name="prewarm", num_nodes=1, num_proc_per_node=1, max_restarts=0, image="",
                               command=["torchrun", "-m", "prewarm"], args=[], env=env, mounts=[])
        spec = podspec.launch_spec(plan, 0, 0, "prewarm", self.layout.root, {})
        self.zygotes.get(spec.zygote_key)


def node_capacity(layout: Layout) -> dict[str, float]:
    """The node's allocatable CPU (cores) and memory (bytes): the machine's, unless `cluster up
    --cpus/--memory` set them (node.json)."""
    capacity = {"cpu": float(os.cpu_count() or 1), "memory": float(objects.meminfo().get("MemTotal", 0))}
    try:
        chosen = json.loads(layout.node_file.read_text())
        capacity.update({k: float(v) for k, v in chosen.items() if k in capacity and v})
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return capacity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="backend.local.controller")
    parser.add_argument("--home", required=True, type=Path)
    parser.add_argument("--ready-fd", type=int)
    parser.add_argument("--foreground", action="store_true", help="do not detach (for debugging)")
    args = parser.parse_args(argv)
    if not args.foreground and os.fork() > 0:
        os._exit(0)  # the starter reaps this parent at once; the controller lives on, detached
    layout = Layout(args.home)
    layout.create()
    lock_fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if args.ready_fd is not None:
            os.write(args.ready_fd, b"busy\n")
        return 0
    os.ftruncate(lock_fd, 0)
    os.write(lock_fd, f"{os.getpid()}\n".encode())
    if args.ready_fd is not None:
        os.set_inheritable(args.ready_fd, False)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format=f"%(asctime)s controller[{os.getpid()}] %(levelname)s %(message)s")
    asyncio.run(Controller(layout).run(args.ready_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main())

