"""A kubelet: one node's agent, running the pods bound to its node as processes and reporting what
becomes of them through the API, as the kubelet does with its container runtime.

It registers its Node and renews its Lease (heartbeat.py), watches the pods whose spec.nodeName
is its node, and gives each one a pod worker (pod_worker.py). It knows no TrainJob or JobSet: a
pod is a pod. What it does for them:

- prepares a container: the volumes' directories (a claim's, from the storage driver; a
  ConfigMap's, Secret's or emptyDir's files written for the pod, removed with it; a hostPath
  under /dev/shm, the node's memory: memory_area.py), its
  environment (podspec.py) with the pod's rendezvous address resolved by the node's network
  (network.py), the GPUs it was allocated (devices.py: NVIDIA_VISIBLE_DEVICES; simulated ones
  counted where torchrun's `auto` would count real ones), its cgroups
  (limits.py: the pod's pids, the node's allocatable memory);
- starts it warm, forked by a zygote that has torch imported (warm.py), when the command is a
  plain `torchrun` of one process per node and the pod does not say `kfcockpit.io/warm-start:
  "false"`, else exec'd as is; the pod's `kfcockpit.io/launch` label says which;
- reports the pod's status (keeping the scheduler's PodScheduled), its events (Created,
  Started, Killing, BackOff, Failed), and deletes it with grace 0 once a pod being deleted has
  ended (the kubelet's last word);
- at start, adopts the pods its previous run left: a run's shim (shim.py) outlives the kubelet
  and the controller process, as a kubelet's containers outlive it (CRI: the runtime, not the
  kubelet, is their parent), so a run whose shim lives is followed on, one whose shim recorded
  its exit ended with it, and one that left neither ended (exit 137, its processes lost); its
  restartPolicy decides what follows an end;
- serves a pod's log (pods/log) and its process (metrics) to the API server.

Stopping it (cancelling `run`) is what a lost machine does to a node: every process of its pods
ends at once (SIGKILL), nothing more is reported and its Lease is no longer renewed.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import shutil
import time
from pathlib import Path
from typing import AsyncIterator, Callable

from backend.errors import InvalidResource
from backend.local.registry.events import Record
from backend.local.node import memory_area, podspec
from backend.local.node import shim
from backend.local.node.container import Container
from backend.local.node.devices import RESOURCE as GPU, Devices
from backend.local.node.heartbeat import Heartbeat
from backend.inotify import FileWatcher
from backend.local.node.limits import PodCgroups
from backend.local.node.logs import FollowedLog, PodLog, follow, log_path, pod_directory
from backend.local.node.network import ADDRESS, Network
from backend.local.node.pod_worker import PodWorker, frozen_by, slowed_by
from backend.local.node.raypods import DRIVER_ANNOTATION, LOG_FORMAT_ENV, ROLE, WORKER_CONTAINER, RayDriver
from backend.local.registry.client import Client
from backend.local.registry.informer import DELETED, Informer
from backend.local.registry.status import bad_request
from backend.local.registry.strategies.pods import WARM_ANNOTATION
from backend.processes import Children

log = logging.getLogger("kfcockpit.kubelet")

Obj = dict
LAUNCH_LABEL = "kfcockpit.io/launch"
# A deleted pod's log stays this long, as the kubelet's container garbage collection keeps a dead
# container's until it collects it (a follower may still read the tail; a person may look).
LOGS_KEPT_SECONDS = 600.0
# A pod the kubelet does not run: it stands for something already running (upstream: the API's
# mirror of a static pod; here, the controller process's own pod).
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def gpus_asked(container: Obj) -> int:
    """The container's nvidia.com/gpu (its limit: an extended resource's request equals it)."""
    resources = container.get("resources") or {}
    value = (resources.get("limits") or {}).get(GPU) or (resources.get("requests") or {}).get(GPU) or 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0



def _sub_path(volume: Path, mount: Obj, container: Obj, pod: Obj, lookup: podspec.Lookup) -> str:
    """What backs a mount: its volume's directory, or the mount's subPath (subPathExpr with the
    container's $(VAR)s expanded) inside it, made a directory when missing as the kubelet makes
    it (pkg/volume/util/subpath: doSafeMakeDir); one that leaves the volume (a symlink) is
    refused, as the kubelet's "is not within the volume" check does."""
    sub = mount.get("subPath") or ""
    if mount.get("subPathExpr"):
        sub = podspec.expand(mount["subPathExpr"], podspec.container_env(container, pod, lookup))
    if not sub:
        return str(volume)
    if sub.startswith("/") or ".." in sub.split("/"):
        raise InvalidResource(f"volumeMount {mount.get('name')!r}: subPath {sub!r} must be a relative path "
                              "without '..'")
    target = volume / sub
    if not target.exists():
        target.mkdir(parents=True, exist_ok=True)
    if not target.resolve().is_relative_to(volume.resolve()):
        raise InvalidResource(f"volumeMount {mount.get('name')!r}: subPath {sub!r} is not within the volume")
    return str(target)

class Kubelet:
    def __init__(self, client: Client, name: str, root: Path, volume_dir: Callable[[str, str], Path],
                 capacity: dict[str, str], children: Children, network: Network, cgroups: PodCgroups,
                 record: Record, pids_limit: int, api_port: Callable[[], int] = lambda: 0, zygotes=None,
                 ray_temp: Callable[[], Path] | None = None, allocatable: dict[str, str] | None = None,
                 labels: dict[str, str] | None = None, devices: Devices | None = None, lease_renew: float = 10.0,
                 confined: bool = False, own_pids: bool = False):
        self.client, self.name, self.root = client, name, root
        self.confined = confined  # each pod in a mount namespace of its own (confine.py), else paths rewritten
        self.own_pids = confined and own_pids  # and a PID namespace of its own (pidns.py)
        self.cluster_id = podspec.cluster_id(root)
        self.memory_area = memory_area.root(self.cluster_id, name)  # its /dev/shm, for hostPath volumes there
        self.volume_dir, self.capacity, self.children = volume_dir, capacity, children
        self.allocatable = allocatable or capacity
        self.devices = devices or Devices([], machine_has_gpus=False)
        self.heartbeat = Heartbeat(client, name, capacity, self.allocatable, labels or {}, cgroups.problem,
                                   lease_renew, record)
        self.network, self.cgroups, self._record = network, cgroups, record
        self.pids_limit, self.api_port, self.zygotes = pids_limit, api_port, zygotes
        self.ray_temp = ray_temp
        self.workers: dict[str, PodWorker] = {}  # by pod uid
        self.ray_drivers: dict[str, RayDriver] = {}  # by the driver pod's uid
        self.pods = Informer(client, "Pod", match=lambda p: (p.get("spec") or {}).get("nodeName") == name)
        self.pods.handlers.append(self._pod_changed)
        self.references = [Informer(client, kind) for kind in ("ConfigMap", "Secret")]
        for informer in self.references:
            informer.handlers.append(self._reference_changed)
        self._recovering = True
        self._stopping = False
        self._files: FileWatcher | None = None  # the log files its runs' shims write

    # ------------------------------------------------------------------ the node and its pods

    async def run(self) -> None:
        self.heartbeat.register()
        tasks = [asyncio.create_task(i.run(), name=f"kubelet {self.name} {i.kind}")
                 for i in (self.pods, *self.references)]
        tasks.append(asyncio.create_task(self.heartbeat.run(), name=f"kubelet {self.name} lease"))
        try:
            await asyncio.gather(*(i.synced.wait() for i in (self.pods, *self.references)))
            self._recovering = False
            self._collect_logs()
            await asyncio.Future()  # runs until cancelled
        finally:
            # The node stops, and its pods' processes with it: nothing more is reported (as when
            # its process dies); its next kubelet finds the pods and applies their restartPolicy.
            self._stopping = True
            for task in tasks:
                task.cancel()
            for worker in list(self.workers.values()):
                worker.kill()
            await asyncio.gather(*tasks, *(w.task for w in self.workers.values() if w.task), return_exceptions=True)
            if self._files is not None:
                self._files.close()
            memory_area.remove(self.memory_area)

    def _pod_changed(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            return
        if (meta.get("labels") or {}).get(ROLE) == "worker":
            self._ray_worker_changed(event_type, pod)
            return
        worker = self.workers.get(meta["uid"])
        if event_type == DELETED:
            if worker is not None and worker.task is not None:
                worker.kill()  # its files go once its last lines are read (a follower may still read them)
                worker.task.add_done_callback(lambda _t: self._forget(pod))
            else:
                self._forget(pod)
            return
        if worker is not None:
            worker.pod = pod
            if meta.get("deletionTimestamp"):
                worker.terminate(float(meta.get("deletionGracePeriodSeconds") or 0))
            else:
                worker.freeze(frozen_by(pod))
                worker.slow(slowed_by(pod))
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            if meta.get("deletionTimestamp"):
                self._last_word(pod)
            return
        if meta.get("deletionTimestamp") and not self._recovering:
            self._last_word(pod)  # deleted before anything of it ran
            return
        worker = self.workers[meta["uid"]] = PodWorker(self, pod)
        if self._recovering:  # it may have run (or be running) under this node's previous kubelet
            worker.recover(ran=bool((pod.get("status") or {}).get("containerStatuses")))
        if meta.get("deletionTimestamp"):
            worker.terminate(0)
        worker.start()

    def _ray_worker_changed(self, event_type: str, pod: Obj) -> None:
        """A Ray worker's pod (raypods.py): deleting it ends its process; one its driver's run
        left behind when this node's previous kubelet stopped ended with it."""
        meta = pod["metadata"]
        driver = self.ray_drivers.get((meta.get("annotations") or {}).get(DRIVER_ANNOTATION, ""))
        if event_type == DELETED:
            run = driver.worker(meta["uid"]) if driver is not None else None
            if run is not None:
                driver.worker_deleted(meta["uid"])
                run.log.closed.add_done_callback(lambda _f: self._forget(pod))
            else:
                self._forget(pod)
        elif meta.get("deletionTimestamp"):
            if driver is not None:
                driver.worker_deleted(meta["uid"])
            self._last_word(pod)
        elif driver is None and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            self.report(pod, {"phase": "Failed", "conditions": [("Ready", "False"), ("ContainersReady", "False")],
                              "containerStatuses": [{"name": WORKER_CONTAINER, "restartCount": 0, "ready": False,
                                                     "state": {"terminated": {
                                                         "exitCode": 137, "reason": "Error",
                                                         "message": "its processes were lost when the node's "
                                                                    "kubelet stopped"}}}]})

    def _reference_changed(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        """A ConfigMap or Secret came (or changed): containers waiting for one look again."""
        namespace = obj["metadata"].get("namespace")
        for worker in self.workers.values():
            if worker.namespace == namespace and worker.run is None:
                worker.wake.set()

    def finished(self, worker: PodWorker) -> None:
        self.workers.pop(worker.uid, None)
        self.ray_drivers.pop(worker.uid, None)
        self.cgroups.release(worker.uid)
        if self._stopping:
            return
        if self.devices.release(worker.uid):
            for waiting in self.workers.values():  # a pod admitted before devices were free looks again
                if waiting.run is None:
                    waiting.wake.set()
        live = self.client.peek("Pod", worker.namespace, worker.name)
        if live is not None and live["metadata"].get("uid") == worker.uid and live["metadata"].get("deletionTimestamp"):
            self._last_word(live)

    def _last_word(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self.client.delete("Pod", meta["namespace"], meta["name"], grace=0, uid=meta["uid"])

    def _forget(self, pod: Obj) -> None:
        """The pod is gone from the API: its projected files go now, its log a while later."""
        meta = pod["metadata"]
        shutil.rmtree(self.root / "projected" / meta["namespace"] / meta["uid"], ignore_errors=True)
        logs = self.root / "logs" / meta["namespace"] / pod_directory(meta["name"], meta["uid"])
        asyncio.get_running_loop().call_later(LOGS_KEPT_SECONDS, shutil.rmtree, logs, True)

    def _collect_logs(self) -> None:
        """At start: the logs of pods no longer in the API (gone while no kubelet ran) go, and
        what still runs of them ends."""
        known = {(p["metadata"]["namespace"], pod_directory(p["metadata"]["name"], p["metadata"]["uid"]))
                 for p in self.client.list("Pod")}
        root = self.root / "logs"
        for directory in root.glob("*/*_*") if root.is_dir() else []:
            if (directory.parent.name, directory.name) not in known:
                for record in (r for path in directory.glob("*/*.shim") if (r := shim.live_record(
                        path.with_suffix(".log")))):
                    shim.kill_run(record)
                shutil.rmtree(directory, ignore_errors=True)

    # ------------------------------------------------------------------ what a pod worker asks (pod_worker.Node)

    def record(self, pod: Obj, event_type: str, reason: str, message: str) -> None:
        if not self._stopping:
            self._record(pod, event_type, reason, message)

    def report(self, pod: Obj, status: Obj, labels: dict[str, str] | None = None) -> None:
        if self._stopping:
            return
        uid = pod["metadata"]["uid"]
        now = self.client.now()

        def merge(live: Obj) -> object:
            if live["metadata"].get("uid") != uid:
                return False
            current = live.setdefault("status", {})
            before = {c["type"]: c for c in current.get("conditions") or []}
            conditions = [before["PodScheduled"]] if "PodScheduled" in before else []
            for kind, state in status["conditions"]:
                was = before.get(kind) or {}
                conditions.append({"type": kind, "status": state, "lastTransitionTime":
                                   was["lastTransitionTime"] if was.get("status") == state else now})
            current.update({k: v for k, v in status.items() if k != "conditions"}, conditions=conditions,
                           hostIP=ADDRESS, hostIPs=[{"ip": ADDRESS}], podIP=ADDRESS, podIPs=[{"ip": ADDRESS}])
            current.setdefault("startTime", now)
            if "reason" not in status:
                current.pop("reason", None)
                current.pop("message", None)

        self.client.mutate("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], merge, status=True)
        if labels:
            def label(live: Obj) -> object:
                have = live["metadata"].setdefault("labels", {})
                if live["metadata"].get("uid") != uid or all(have.get(k) == v for k, v in labels.items()):
                    return False
                have.update(labels)
            self.client.mutate("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], label)

    def oom_killed(self, pod: Obj) -> bool:
        return self.cgroups.oom_killed(pod["metadata"]["uid"])

    def limit_reached(self, pod: Obj) -> str:
        if self.cgroups.hit_limit(pod["metadata"]["uid"]):
            return (f"the pod reached its limit of {self.pids_limit} processes and threads (the kubelet's "
                    "podPidsLimit)")
        return ""

    def lookup(self, namespace: str) -> podspec.Lookup:
        """(ConfigMap|Secret, name) -> its data in `namespace` (a Secret's decoded), or None."""
        def find(kind: str, name: str) -> dict[str, str] | None:
            obj = self.client.peek(kind, namespace, name)
            if obj is None:
                return None
            data = dict(obj.get("data") or {})
            if kind == "Secret":
                data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            return data
        return find

    def prepare(self, pod: Obj, container: Obj) -> tuple[podspec.LaunchSpec, tuple[str, ...]]:
        meta = pod["metadata"]
        mounts = self._mounts(pod, container)
        rewritten = {} if self.confined else mounts  # confined, a pod finds its volumes at their mountPaths
        env = podspec.base_env()
        env.update(self.network.resolve(pod, podspec.container_env(container, pod, self.lookup(meta["namespace"]))))
        env = {k: podspec.rewrite_mounts(v, rewritten) for k, v in env.items()}
        if (meta.get("labels") or {}).get(ROLE) == "driver":
            env.update(self._ray_env())
        env.update(self.devices.env(meta["uid"], gpus_asked(container), env))
        env.update({podspec.ENV_CLUSTER: self.cluster_id, podspec.ENV_POD: meta["uid"],
                    "HOSTNAME": (pod.get("spec") or {}).get("hostname") or meta["name"],
                    "KUBERNETES_SERVICE_HOST": ADDRESS, "KUBERNETES_SERVICE_PORT": str(self.api_port())})
        argv = [podspec.rewrite_mounts(podspec.expand(a, env), rewritten)
                for a in (container.get("command") or []) + (container.get("args") or [])]
        warm = (meta.get("annotations") or {}).get(WARM_ANNOTATION, "true").lower() not in ("false", "0", "no")
        spec = podspec.launch_spec(argv, env, warm)
        if self.confined:
            spec.confine = self._confinement(pod, container, mounts, spec.cwd)
        return spec, self.cgroups.pod(meta["uid"], self.pids_limit, podspec.memory_limit(container))

    def _confinement(self, pod: Obj, container: Obj, mounts: dict[str, str], cwd: str) -> dict:
        """confine.enter's plan: the pod's mounts (ConfigMaps, Secrets and projected volumes
        read-only, as the kubelet mounts them since CVE-2017-1002102), the state root and the
        kubeconfig beside it (the admin token: layout.py) hidden."""
        meta = pod["metadata"]
        volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
        read_only = {m["mountPath"] for m in container.get("volumeMounts") or []
                     if m.get("readOnly") or any(k in volumes.get(m.get("name"), {})
                                                 for k in ("configMap", "secret", "projected"))}
        top = self.root / "projected" / meta["namespace"] / meta["uid"] / ".root"
        top.mkdir(parents=True, exist_ok=True)
        return {"root": str(top), "mounts": [[path, source, path in read_only] for path, source in mounts.items()],
                "hide": [str(self.root), str(self.root.parent / "kubeconfig")], "cwd": cwd,
                "pid_namespace": self.own_pids}

    def _ray_env(self) -> dict[str, str]:
        """A Ray driver's: its Ray's files under the state root (finished sessions pruned), its
        workers' lines prefixed with their pid, plainly."""
        from backend.raytrain.tempdir import prune_sessions

        env = dict(LOG_FORMAT_ENV)
        if self.ray_temp is not None:
            temp = self.ray_temp()
            temp.mkdir(parents=True, exist_ok=True)
            prune_sessions(temp)
            env["RAY_TMPDIR"] = str(temp)
        return env

    def _mounts(self, pod: Obj, container: Obj) -> dict[str, str]:
        """Each mount path of the container -> the directory of the node that backs it."""
        meta = pod["metadata"]
        volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
        found = {}
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(mount.get("name"))
            if volume is None:
                raise InvalidResource(f"volumeMount {mount.get('name')!r}: no volume of that name")
            if "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"].get("claimName", "")
                directory = self.volume_dir(meta["namespace"], claim)
                if not directory.is_dir():
                    raise InvalidResource(f"volume {mount['name']!r}: persistentvolumeclaim {claim!r} has no volume "
                                          "on this node")
                found[mount["mountPath"]] = _sub_path(directory, mount, container, pod, self.lookup(meta["namespace"]))
                continue
            host = memory_area.host_directory(self.memory_area, (volume.get("hostPath") or {}).get("path", ""))
            if host is not None:
                found[mount["mountPath"]] = _sub_path(host, mount, container, pod, self.lookup(meta["namespace"]))
                continue
            directory = self.root / "projected" / meta["namespace"] / meta["uid"] / volume["name"]
            source = podspec.projected_source(volume)
            if "projected" in volume:
                source = ("Projected", volume["name"])
                data = podspec.projected_files(volume, self.lookup(meta["namespace"]), self._token_minter(pod))
            else:
                data = {} if source is None else self.lookup(meta["namespace"])(*source)  # emptyDir: empty
            if data is None:
                raise InvalidResource(f"volume {volume['name']!r}: {source[0].lower()} {source[1]!r} not found")
            if source is not None or not directory.exists():
                shutil.rmtree(directory, ignore_errors=True)
                directory.mkdir(parents=True)
                for key, value in data.items():
                    (directory / key).write_text(value)
            found[mount["mountPath"]] = _sub_path(directory, mount, container, pod, self.lookup(meta["namespace"]))
        return found

    def _token_minter(self, pod: Obj):
        """The TokenRequest the kubelet makes for a projected serviceAccountToken: bound to the
        pod's service account, for the source's audience."""
        meta = pod["metadata"]
        subject = f"system:serviceaccount:{meta['namespace']}:{pod['spec'].get('serviceAccountName') or 'default'}"

        def mint(audience: str, seconds: int) -> str:
            if self.client.tokens is None:
                raise InvalidResource("this cluster issues no service-account tokens")
            return self.client.tokens.mint(audience, seconds, subject, time.time())
        return mint

    def open_log(self, pod: Obj, container: str, restart: int) -> PodLog | FollowedLog:
        meta = pod["metadata"]
        path = log_path(self.root / "logs", meta["namespace"], meta["name"], meta["uid"], container, restart)
        if (meta.get("labels") or {}).get(ROLE) != "driver":
            return FollowedLog(path, self.files)
        driver = self.ray_drivers[meta["uid"]] = RayDriver(self, pod, self.root / "logs")
        return PodLog(path, router=driver.route)

    @property
    def files(self) -> FileWatcher:
        if self._files is None:
            self._files = FileWatcher()
        return self._files

    def adopt(self, pod: Obj, container: str, restart: int) -> tuple[Container, int] | None:
        """The newest run of the pod's container (its restart at least `restart`: one started just
        before the previous kubelet stopped may not have been reported) that its node's previous
        kubelet left (a live shim, or the status its shim recorded), followed on; None when it
        left none."""
        meta = pod["metadata"]
        if (meta.get("labels") or {}).get(ROLE) == "driver":
            return None  # a Ray driver's run is the kubelet's own child: it ended with it
        directory = log_path(self.root / "logs", meta["namespace"], meta["name"], meta["uid"], container, 0).parent
        newest = max((int(p.stem) for p in directory.glob("*.shim") if p.stem.isdigit() and int(p.stem) >= restart),
                     default=None)
        if newest is None:
            return None
        path = directory / f"{newest}.log"
        record, status = shim.live_record(path), shim.recorded_status(path)
        run = Container(meta["uid"], self.cluster_id, FollowedLog(path, self.files))
        run.adopt(record, status)
        if run.devices:
            self.devices.adopt(meta["uid"], run.devices.split(","))
        log.info("pod %s/%s: %s", meta["namespace"], meta["name"],
                 f"adopted its running container (shim pid {record['shim']})" if record is not None else
                 f"its container ended while no kubelet ran (wait status {status})")
        return run, newest

    def ended(self, pod: Obj, run: Container, code: int) -> None:
        driver = self.ray_drivers.get(pod["metadata"]["uid"])
        if driver is not None:
            driver.driver_ended(code == 0)

    async def start(self, pod: Obj, run: Container, spec: podspec.LaunchSpec, cgroups: tuple[str, ...]) -> None:
        driver = self.ray_drivers.get(pod["metadata"]["uid"])
        if driver is not None:
            driver.run = run
            ignored = (pod["metadata"].get("annotations") or {}).get("kfcockpit.io/ray-ignored")
            if ignored:
                run.log.note(f"kfcockpit: runtimeEnvYAML {ignored} not applied on the embedded cluster (its pods run "
                             "this environment)")
        fork = None
        if spec.warm is not None and self.zygotes is not None:
            zygote = self.zygotes.get(spec.zygote_key)
            if await zygote.ready and zygote.usable:
                fork = zygote.spawn
            else:
                log.warning("pod %s: warm workers unavailable (%s); running the command as is", run.key,
                            zygote.problem)
        await run.start(spec, self.children.exit_of, fork, cgroups)

    # ------------------------------------------------------------------ what the API server asks

    def pod_pid(self, namespace: str, name: str) -> int | None:
        for worker in self.workers.values():
            if (worker.namespace, worker.name) == (namespace, name):
                return worker.pid()
        for driver in self.ray_drivers.values():
            for run in driver.by_uid.values():
                meta = run.pod["metadata"]
                if (meta["namespace"], meta["name"]) == (namespace, name) and not run.finished.done():
                    return run.pid
        return None

    async def logs(self, pod: Obj, options: dict[str, str]) -> AsyncIterator[bytes]:
        """pods/log of a pod on this node."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        names = [c.get("name") for c in spec.get("containers") or []]
        container = options.get("container") or (names[0] if names else "")
        if container not in names:
            raise bad_request(f"container {container} is not valid for pod {meta['name']}")
        statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
        restart = int(statuses[0].get("restartCount") or 0)
        worker = self.workers.get(meta["uid"])
        ray_worker = next((d.worker(meta["uid"]) for d in self.ray_drivers.values() if d.worker(meta["uid"])), None)
        if options.get("previous") in ("1", "t", "T", "true", "True", "TRUE"):
            restart -= 1
            path = log_path(self.root / "logs", meta["namespace"], meta["name"], meta["uid"], container, restart)
            if restart < 0 or not path.exists():
                raise bad_request(f'previous terminated container "{container}" in pod "{meta["name"]}" not found')
            live = None
        else:
            path = log_path(self.root / "logs", meta["namespace"], meta["name"], meta["uid"], container, restart)
            live = worker.run.log if worker is not None and worker.run is not None and worker.restarts == restart \
                else ray_worker.log if ray_worker is not None else None
        async for chunk in follow(path, live, options):
            yield chunk
