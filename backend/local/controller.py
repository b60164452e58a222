"""The embedded cluster's process, and the composition root of its control plane: the one place that
builds the store, the registry, the API server, the controllers and the nodes' kubelets (fleet.py,
of the shape `cluster up` chose: shape.py), and wires them together. Nothing below it knows it.
Exactly one runs per state root (an fcntl lock); clients start it on demand.

    python -m backend.local.controller --home DIR --ready-fd N   (started by client.py)

It is single-threaded on purpose: pods are forked from it (and from its zygote), and fork is only
safe without other threads; every controller and kubelet is a task of one asyncio loop, fed by
the store's watches (asyncio queues: a change reaches them one loop iteration after it is stored).

When it dies its pods run on: each container's run is below a shim of its own (node/shim.py, as
containerd-shim), not below this process, as a kubelet's containers outlive a restart of the
kubelet, the apiserver or the controller manager. The next one kills any process still marked
with this state root but the live runs, and its kubelets adopt those (followed on, not
restarted); a run that ended meanwhile ended with the status its shim recorded. Stopping it
(`cluster down`, SIGTERM) is not a crash: its kubelets end their pods first.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import logging
import os
import signal
import sys
import time
from pathlib import Path

from backend.local import bootstrap
from backend.local import shape as shapes
from backend.local.apiserver import credentials
from backend.local.apiserver.listen import Listener
from backend.local.apiserver.server import ApiServer
from backend.local.apiserver.trainer_status import TrainerStatusServer
from backend.local.controllers.disruption import DisruptionController
from backend.local.controllers.failurerecovery import FailureRecoveryController
from backend.local.controllers.gc import GarbageCollector
from backend.local.controllers.job import JobController
from backend.local.controllers.jobset import JobSetController
from backend.local.controllers.namespace import NamespaceController
from backend.local.controllers.nodelifecycle import NodeLifecycleController
from backend.local.controllers.rayjob import RayJobController
from backend.local.controllers.scheduler import Scheduler
from backend.local.controllers.snapshots import Snapshotter
from backend.local.controllers.tainteviction import TaintEvictionController
from backend.local.controllers.trainjob import TrainJobController
from backend.local.controllers.trainjob_status import StatusServer
from backend.local.controllers.volumes import Provisioner
from backend.local.fleet import Fleet
from backend.local.layout import Layout
from backend.local.lifecycle import Lifecycle
from backend.local.migrate import migrate
from backend.local.node import podspec, shim
from backend.local.node.network import LOOPBACK_ENV, Network
from backend.local.node.warm import ZygotePool
from backend.local.registry.client import Client
from backend.local.registry.events import Events
from backend.local.registry.generic import Registry
from backend.local.registry.informer import Informer
from backend.local.registry.kinds import Kinds
from backend.local.registry.store import Store
from backend.local.registry.tokens import TokenIssuer
from backend.local.registry.strategies import strategies
from backend.processes import Children, become_subreaper, descendants, marked_processes, sweep, wait_gone
from backend.raytrain.tempdir import ray_temp_dir

log = logging.getLogger("kfcockpit.controller")

class ControlPlane:
    """Everything of one state root's cluster, built and wired."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.started = time.time()
        self.shape = shape = shapes.load(layout.shape_file)
        self.kinds = Kinds()
        self.store = Store(self.kinds, layout.objects)
        self.registry = Registry(self.kinds, self.store, strategies(
            self.kinds, check_state_root=lambda: ray_temp_dir(layout.home),
            toleration_seconds=(shape.default_not_ready_toleration_seconds,
                                shape.default_unreachable_toleration_seconds)))
        self.client = Client(self.registry)
        events = Events(self.client)
        self.children = Children()
        self.zygotes: ZygotePool | None = None
        self.listener: Listener | None = None
        self.fleet = Fleet(shape, layout.root, self.client, self.children, Network(), events.recorder("kubelet"),
                           self._claim_dir, api_port=lambda: self.listener.port if self.listener else 0,
                           ray_temp=lambda: ray_temp_dir(layout.home))
        self.controllers = [
            GarbageCollector(self.client), NamespaceController(self.client),
            NodeLifecycleController(self.client, events.recorder("node-controller"), shape.node_monitor_grace_period),
            TaintEvictionController(self.client, events.recorder("taint-eviction-controller")),
            FailureRecoveryController(self.client, events.recorder("kueue-failure-recovery"),
                                      shape.forceful_termination_grace_period),
            DisruptionController(self.client),
            TrainJobController(self.client, events.recorder("trainjob-controller"), time.time, self._status_server),
            JobSetController(self.client, events.recorder("jobset-controller")),
            JobController(self.client, events.recorder("job-controller")),
            Scheduler(self.client, events.recorder("default-scheduler")),
            Provisioner(self.client, events.recorder("kfcockpit.io/local-dir"), layout.volumes, layout.snapshots,
                        self._copy),
            Snapshotter(self.client, events.recorder("snapshot-controller"), layout.snapshots, layout.volumes),
            RayJobController(self.client, events.recorder("rayjob-controller")),
        ]
        self.server = ApiServer(self.registry, self.fleet, "", self._streams_changed)
        # What the process itself follows, on informers (never inside a store write): pods for the
        # idle exit, runtimes applied to have the warm workers ready before their first job's pods.
        self.followed = [Informer(self.client, "Pod")] + [
            Informer(self.client, kind) for kind in ("TrainingRuntime", "ClusterTrainingRuntime")]
        self.followed[0].handlers.append(lambda _type, _pod, _old: self.lifecycle.check_idle())
        for informer in self.followed[1:]:
            informer.handlers.append(self._runtime_changed(informer))
        self.trainer_status: TrainerStatusServer | None = None  # the Trainer's, TrainJobStatus on
        self.ca_cert = ""
        self.lifecycle = Lifecycle(layout, self._busy, self._status, self.prewarm, self._stop, ops={
            "node-fail": lambda request: self._node(self.fleet.fail, request),
            "node-restore": lambda request: self._node(self.fleet.restore, request),
            "warmed": lambda _request: self._warmed()})
        self._stopping = asyncio.Event()

    def _status_server(self) -> StatusServer | None:
        """Where the Trainer's status server listens, once it does."""
        if self.trainer_status is None or not self.trainer_status.port:
            return None
        return StatusServer(f"https://127.0.0.1:{self.trainer_status.port}", self.ca_cert)

    # ------------------------------------------------------------------ the process

    async def run(self, ready_fd: int | None) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._stop)
        loop.add_signal_handler(signal.SIGINT, self._stop)
        self.children.install()
        become_subreaper()
        self._sweep_leftovers()
        first_start = not self.store.directory.exists()
        self.store.load()
        migrate(self.layout, self.store)
        self.layout.create()
        bootstrap.ensure(self.client, self.fleet.names, first_start)
        self.zygotes = ZygotePool(podspec.cluster_id(self.layout.root), sys.stderr.fileno(), self.children.exit_of)
        self.fleet.set_zygotes(self.zygotes)
        pki = credentials.load_or_create(self.layout.root / "pki")
        self.server.token = pki.token
        self.server.schemas.start(lambda argv: self.children.run(argv, podspec.base_env(), podspec.PROJECT_ROOT))
        self.listener = Listener(self.server, pki)
        await self.listener.start(self.layout.root / "api-port", self.layout.home / "kubeconfig")
        self.client.tokens = TokenIssuer.load_or_create(self.layout.root / "pki" / "service-account.key")
        self.trainer_status = TrainerStatusServer(self.client, self.client.tokens)
        await self.trainer_status.start(self.layout.root / "trainer-status-port", pki)
        self.ca_cert = pki.ca_cert.read_text()
        socket_server = await self.lifecycle.serve()
        self.fleet.start()
        tasks = [asyncio.create_task(part.run(), name=type(part).__name__) for part in self.controllers]
        tasks += [asyncio.create_task(informer.run(), name=f"{informer.kind} informer") for informer in self.followed]
        tasks.append(asyncio.create_task(_watch_stalls(), name="stall watch"))
        log.info("controller %s serving %s", os.getpid(), self.layout.socket)
        self.lifecycle.check_idle()
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
        await self._stopping.wait()
        log.info("controller %s stopping", os.getpid())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.fleet.stop()
        self.zygotes.stop()
        await self.listener.close()
        await self.trainer_status.close()
        socket_server.close()
        self.layout.socket.unlink(missing_ok=True)

    def _stop(self) -> None:
        self._stopping.set()

    def _sweep_leftovers(self) -> None:
        """Kill whatever a previous controller of this state root left running but its pods' live
        runs (their shims and what is below them: the kubelets adopt them), and wait for it."""
        marker = podspec.cluster_marker(self.layout.root)
        runs = descendants({record["shim"] for record in shim.live_runs(self.layout.root / "logs")})
        pids = sweep(marker, spare=runs)
        if not pids:
            return
        log.warning("killed %d process(es) left by a previous controller: %s", len(pids), pids)
        wait_gone(pids, 10)
        left = [pid for pid in marked_processes(marker) if pid not in runs]
        if left:
            log.error("processes of this state root still alive after SIGKILL: %s", left)

    # ------------------------------------------------------------------ wiring

    def _claim_dir(self, namespace: str, claim: str) -> Path:
        """The directory of a claim's volume on this machine (its volumeName, the provisioner's)."""
        obj = self.client.peek("PersistentVolumeClaim", namespace, claim) or {}
        return self.layout.volume_dir(namespace, (obj.get("spec") or {}).get("volumeName") or f"{claim}-unbound")

    async def _copy(self, argv: list[str], output: Path) -> int:
        return await self.children.run(argv, podspec.base_env(), podspec.PROJECT_ROOT, output)

    def _runtime_changed(self, informer: Informer):
        """A runtime applied while the cluster runs (not those listed at its start: they wait for
        `cluster up` or a job) starts its warm workers."""
        def handler(event_type: str, runtime: dict, _old: dict | None) -> None:
            if event_type == "ADDED" and informer.synced.is_set():
                self.prewarm(runtime)
        return handler

    def prewarm(self, runtime: dict | None = None) -> None:
        """Start the zygote for a runtime's pods now, so they do not wait for torch to import.
        Started on demand (cluster up or Embedded.warm, a runtime applied), not with every
        controller: most controllers only answer a few reads, and the import costs seconds of CPU."""
        if self.zygotes is None:
            return
        runtime = runtime or self.client.peek("TrainingRuntime", "default", "kfcockpit-torch")
        env = podspec.base_env()
        env["OMP_NUM_THREADS"] = "1"
        env.update(LOOPBACK_ENV)  # as the kubelet tells every pod (NCCL_* is in a zygote's key)
        for rjob in ((((runtime or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "replicatedJobs") or []:
            for container in (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get(
                    "spec", {}).get("containers") or []:
                if container.get("name") == "node":
                    env.update({e["name"]: str(e["value"]) for e in container.get("env") or []
                                if isinstance(e, dict) and e.get("value") is not None})
        self.zygotes.get(podspec.zygote_key(env))

    async def _warmed(self) -> dict:
        """Start the warm workers (as `up` does) and answer once they are ready to fork pods."""
        self.prewarm()
        if self.zygotes is not None:
            await self.zygotes.settled()
        return self._status()

    def _busy(self) -> bool:
        if self.server.open_streams:
            return True
        return any((p.get("status") or {}).get("phase") in ("Pending", "Running") and
                   "kubernetes.io/config.mirror" not in (p["metadata"].get("annotations") or {})
                   for p in self.store.list(self.kinds.named("Pod")))

    def _streams_changed(self, open_streams: int) -> None:
        self.lifecycle.check_idle()  # a client watching through the API keeps the cluster up

    def _status(self) -> dict:
        pods = self.store.list(self.kinds.named("Pod"))
        return {"pid": os.getpid(), "home": str(self.layout.home), "started": self.started,
                "jobs": len(self.store.list(self.kinds.named("TrainJob"))) +
                len(self.store.list(self.kinds.named("RayJob"))),
                "pods_running": sum((p.get("status") or {}).get("phase") == "Running" for p in pods),
                "warm": self.zygotes.status() if self.zygotes else [],
                "nodes": self.fleet.names, "failed_nodes": self.fleet.failed(),
                "simulated_gpus": self.fleet.simulated_gpus, "timings": self.shape.timings()}

    async def _node(self, act, request: dict) -> dict:
        """node-fail / node-restore: what the machine does to one of its nodes."""
        message = act(str(request.get("node") or ""))
        if asyncio.iscoroutine(message):
            message = await message
        return {"ok": True, "message": message}


async def _watch_stalls(every: float = 0.25, told: float = 1.0) -> None:
    """Say in controller.log when the loop could not run for `told` seconds or more: every
    kubelet's heartbeat, every watch and controller waited that long (a slow disk's fsync, a
    starved machine), which a node lifecycle with the lesson's 4 s grace may read as lost nodes."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(every)
        late = loop.time() - before - every
        if late >= told:
            log.warning("the control plane's loop stalled %.1f s: heartbeats, watches and controllers waited", late)


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

    async def serve() -> None:
        await ControlPlane(layout).run(args.ready_fd)

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
