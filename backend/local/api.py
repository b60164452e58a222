"""The embedded cluster's Kubernetes API: the controller's side of backend/local/apiserver.

`ClusterApi` owns the object store and the HTTPS listener (127.0.0.1 only, bearer token) and
ties them to the controller:
- admission: upstream defaults and rules (admission.py), then the cockpit's models;
- written / deleting: what an object declares is done by the controller (a TrainJob runs, a
  PVC gets its directory, filled from its dataSource by provisioner.py, a VolumeSnapshot is
  taken and bound to its VolumeSnapshotContent, a pod is killed);
- the mirror: every pod and job change a runner publishes becomes the Pod, TrainJob status and
  JobSet objects clients read and watch (objects.py);
- pods/log from the pods' log files, followed on the runners' log events.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import secrets
import shutil
import socket
import ssl
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator

from aiohttp import web

from backend.errors import ClusterError
from backend.local import admission, barepods, objects, pod_log, provisioner
from backend.local.apiserver import credentials, schemas
from backend.local.apiserver.kinds import Kind, Registry
from backend.local.apiserver.server import ApiServer, Hooks
from backend.local.apiserver.status import ApiError, conflict, invalid, refused
from backend.local.apiserver.store import Store
from backend.local.mirror import Mirror
from backend.quantity import quantity

if TYPE_CHECKING:
    from backend.local.controller import Controller

log = logging.getLogger("kfcockpit.api")

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
STORAGE_CLASS = "standard"
SNAPSHOT_CLASS = "kfcockpit-snapclass"
DRIVER = "kfcockpit.io/local-dir"
LIMITS_WARNING = ("resources.limits are not enforced on the embedded cluster (its pods are plain processes); "
                  "requests are, by its scheduler")
_MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
INSTALLED = (_MANIFESTS / "embedded" / "torch-distributed.yaml", _MANIFESTS / "runtime.yaml")
# Kinds only the controllers create: a client's Pod or JobSet would never run, so it is refused.
_RUN_BY_CONTROLLERS = ("JobSet", "Node")


class ClusterApi(Hooks):
    def __init__(self, ctl: "Controller", capacity: dict[str, float]):
        self.ctl = ctl
        self.capacity = capacity
        self.registry = Registry()
        self.store = Store(self.registry, ctl.layout.root / "objects")
        self.kinds = {k.kind: k for k in self.registry.kinds if k.group != "metrics.k8s.io"}
        self.credentials: credentials.Credentials | None = None
        self.server: ApiServer | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.mirror = Mirror(self)
        self.controller_pod = ""
        self._provisioning: dict[tuple[str | None, str], asyncio.Task] = {}  # claims whose volume is being copied

    # ------------------------------------------------------------------ start / stop

    def load(self) -> None:
        """Stored objects, and what every cluster has from its first start."""
        first_start = not self.store.directory.exists()
        self.store.load()
        for name in (*SYSTEM_NAMESPACES, objects.TRAINER_NAMESPACE):
            if self.store.find(self.kinds["Namespace"], None, name) is None:
                self.store.create(self.kinds["Namespace"], {"metadata": {"name": name},
                                                            "spec": {"finalizers": ["kubernetes"]},
                                                            "status": {"phase": "Active"}})
        self.store.create(self.kinds["Node"], objects.node_object(self.capacity["cpu"], self.capacity["memory"]))
        # What installing the Trainer gives, its controller-manager pod: this process is that
        # controller. Pods are not kept across restarts, so it is made at each start.
        self.controller_pod = f"kubeflow-trainer-controller-manager-{secrets.token_hex(3)[:5]}"
        self.store.create(self.kinds["Pod"], objects.controller_pod(self.controller_pod, os.getpid(), time.time()))
        if not self.store.list(self.kinds["StorageClass"]):
            self.store.create(self.kinds["StorageClass"], {
                "metadata": {"name": STORAGE_CLASS,
                             "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                "provisioner": DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
        if not self.store.list(self.kinds["VolumeSnapshotClass"]):
            self.store.create(self.kinds["VolumeSnapshotClass"], {
                "metadata": {"name": SNAPSHOT_CLASS,
                             "annotations": {"snapshot.storage.kubernetes.io/is-default-class": "true"}},
                "driver": DRIVER, "deletionPolicy": "Delete"})
        for ns in SYSTEM_NAMESPACES[:1]:
            if self.store.find(self.kinds["ServiceAccount"], ns, "default") is None:
                self.store.create(self.kinds["ServiceAccount"], {"metadata": {"name": "default", "namespace": ns}})
        if first_start:
            self._install(INSTALLED)

    def _install(self, files: tuple[Path, ...]) -> None:
        """What `manifests/install/install.sh` puts on a kind cluster: the Trainer's stock runtime
        and public ConfigMap, and the lesson's runtime. Once, on the first start: a user who
        deletes them later keeps them deleted."""
        import yaml

        for path in files:
            for doc in yaml.safe_load_all(path.read_text()):
                kind = self.registry.by_kind(doc["apiVersion"], doc["kind"])
                meta = doc.setdefault("metadata", {})
                if kind.namespaced:
                    meta.setdefault("namespace", "default")
                if self.store.find(kind, meta.get("namespace"), meta["name"]) is None:
                    self.store.create(kind, doc)

    async def serve(self) -> None:
        layout = self.ctl.layout
        self.credentials = credentials.load_or_create(layout.root / "pki")
        schemas.start(self.ctl.run_child)
        self.server = ApiServer(self.registry, self.store, self, self.credentials.token)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.credentials.server_cert, self.credentials.server_key)
        context.set_alpn_protocols(["http/1.1"])
        self._runner = web.AppRunner(self.server.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        sock = _listen(layout.root / "api-port")
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, ssl_context=context, shutdown_timeout=0.5).start()
        credentials.write_kubeconfig(layout.home / "kubeconfig", f"https://127.0.0.1:{self.port}", self.credentials)
        log.info("Kubernetes API on https://127.0.0.1:%d (kubeconfig %s)", self.port, layout.home / "kubeconfig")

    async def close(self) -> None:
        self.store.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ hooks: admission

    def admit(self, kind: Kind, operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
        if operation == "CREATE" and kind.kind in _RUN_BY_CONTROLLERS:
            raise refused(f"the embedded cluster creates {kind.plural} itself (for TrainJobs and RayJobs) and does not "
                          f"run {kind.plural} created through the API: apply a TrainJob instead")
        if kind.kind == "Namespace" and operation == "CREATE":
            obj.setdefault("status", {"phase": "Active"})
        if kind.kind == "VolumeSnapshotContent" and operation == "CREATE":
            raise refused("the embedded cluster makes a VolumeSnapshotContent for each VolumeSnapshot it takes; "
                          "pre-provisioned snapshot contents are not supported: create a VolumeSnapshot instead")
        if kind.kind == "PersistentVolumeClaim" and operation == "CREATE":
            admission.normalize_data_sources(obj.setdefault("spec", {}))
            admission.validate_claim_data_source(kind, obj)
        warnings = []
        if kind.kind == "Pod" and operation == "CREATE":
            self._default_pod(kind, obj)
            if any((c.get("resources") or {}).get("limits") for c in obj["spec"].get("containers") or []):
                warnings.append(LIMITS_WARNING)
        if kind.kind == "Secret":  # stringData is write-only: merged into data (core/v1 Secret)
            obj["type"] = obj.get("type") or "Opaque"
            for key, value in (obj.pop("stringData", None) or {}).items():
                obj.setdefault("data", {})[key] = base64.b64encode(str(value).encode()).decode()
        if kind.kind == "TrainJob":
            admission.default_trainjob(obj)
            admission.validate_trainjob(kind, obj, old, self._runtime_exists)
        if kind.kind not in admission.MODELLED:
            return warnings
        if old is not None and kind.kind in ("TrainJob", "RayJob"):
            admission.immutable_spec(kind, obj, old)
        if old is not None and kind.kind == "VolumeSnapshot" and obj.get("spec") != old.get("spec"):
            raise invalid(kind.kind, obj["metadata"]["name"], [("spec.source", "Invalid value: field is immutable")],
                          kind.group)
        resource = admission.check_model(kind, obj)
        if operation == "CREATE" and kind.kind in ("TrainJob", "RayJob"):
            name = obj["metadata"]["name"]
            # The same job again is the store's AlreadyExists (what `apply` expects), not this.
            taken = name in self.ctl.runners and self.store.find(kind, obj["metadata"]["namespace"], name) is None
            if taken:
                raise conflict(kind.plural, name, f"a {self.ctl.runners[name].kind} of that name exists (jobs share "
                               "one set of names across namespaces on the embedded cluster)", kind.group)
            self.ctl.check_job(resource)
            for claim, _ in resource.volume_mounts():
                if self.store.find(self.kinds["PersistentVolumeClaim"], obj["metadata"]["namespace"], claim) is None:
                    raise invalid(kind.kind, name, [("spec", f"PersistentVolumeClaim {claim!r} not found: apply it "
                                                     "first (kubectl apply -f manifests/volume.yaml)")], kind.group)
        if kind.kind == "TrainJob" and (((obj.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode")
                                        or {}).get("limits"):
            warnings.append(LIMITS_WARNING)
        if operation == "CREATE" and kind.kind == "VolumeSnapshot":
            claim = resource.spec.source.persistent_volume_claim_name
            if self.store.find(self.kinds["PersistentVolumeClaim"], obj["metadata"]["namespace"], claim) is None:
                raise invalid(kind.kind, obj["metadata"]["name"],
                              [("spec.source.persistentVolumeClaimName",
                                f"Not found: volume {claim!r} not found (apply its PersistentVolumeClaim first)")],
                              kind.group)
        return warnings

    def resolver(self, namespace: str | None):
        """(ConfigMap|Secret, name) → its data in `namespace` (a Secret's decoded), or None."""
        def resolve(kind_name: str, name: str) -> dict[str, str] | None:
            obj = self.store.find(self.kinds[kind_name], namespace or "default", name)
            if obj is None:
                return None
            data = dict(obj.get("data") or {})
            if kind_name == "Secret":
                data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            return data
        return resolve

    def _default_pod(self, kind: Kind, obj: dict[str, Any]) -> None:
        """core/v1 defaults of a pod a client creates, and what the embedded kubelet cannot run."""
        problems = barepods.check_spec(obj)
        if problems:
            raise invalid(kind.kind, obj["metadata"]["name"], problems, kind.group)
        spec = obj.setdefault("spec", {})
        for key, value in (("restartPolicy", "Always"), ("terminationGracePeriodSeconds", 30),
                           ("schedulerName", "default-scheduler"), ("serviceAccountName", "default"),
                           ("dnsPolicy", "ClusterFirst")):
            spec.setdefault(key, value)
        obj["status"] = {"phase": "Pending", "qosClass": objects.qos(spec)}

    def bare_pod_unschedulable(self, namespace: str, name: str, why: str) -> None:
        """A bare pod the scheduler cannot place yet: Pending, PodScheduled False, FailedScheduling."""
        kind = self.kinds["Pod"]
        live = self.store.find(kind, namespace, name)
        if live is None:
            return
        status = {**(live.get("status") or {}), "phase": "Pending",
                  "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                  "message": why, "lastTransitionTime": objects.rfc3339(time.time())}]}
        self.store.update(kind, {**live, "status": status})
        self.mirror.event(live, "Warning", "FailedScheduling", why, "default-scheduler")

    def bare_pod_status(self, namespace: str, name: str, phase: str, container: dict[str, Any],
                        reason: str = "") -> None:
        """A bare pod's status as its kubelet (barepods.py) sees it."""
        kind = self.kinds["Pod"]
        live = self.store.find(kind, namespace, name)
        if live is None:
            return
        running = "running" in container["state"]
        now = objects.rfc3339(time.time())
        status = {**(live.get("status") or {}), "phase": phase, "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
                  "podIPs": [{"ip": "127.0.0.1"}], "containerStatuses": [container],
                  "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                                 {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                                 {"type": "ContainersReady", "status": str(running), "lastTransitionTime": now},
                                 {"type": "Ready", "status": str(running), "lastTransitionTime": now}]}
        status.setdefault("startTime", now)
        if reason:
            status["reason"] = reason
        first_bind = not (live.get("spec") or {}).get("nodeName")
        self.store.update(kind, {**live, "spec": {**live["spec"], "nodeName": socket.gethostname()},
                                 "status": status})
        if first_bind:
            self.mirror.event(live, "Normal", "Scheduled", f"Successfully assigned {namespace}/{name} to "
                                                    f"{socket.gethostname()}", "default-scheduler")
        if running:
            self.mirror.event(live, "Normal", "Started", "Started container (a process on this machine)", "kubelet")
        elif "waiting" in container["state"]:
            self.mirror.event(live, "Warning", container["state"]["waiting"]["reason"],
                       container["state"]["waiting"].get("message", ""), "kubelet")

    def bare_pod_gone(self, namespace: str, name: str) -> None:
        """Its process has ended after a delete: the object (and the kubelet's record) go now."""
        kind = self.kinds["Pod"]
        if self.store.find(kind, namespace, name) is not None:
            self.store.delete(kind, namespace, name)
        self.ctl.forget_bare_pod(f"{namespace}.{name}")

    def _runtime_exists(self, kind_name: str, name: str, namespace: str | None) -> bool:
        kind = self.kinds.get(kind_name or "")
        if kind is None or kind.kind not in ("TrainingRuntime", "ClusterTrainingRuntime"):
            return False
        return self.store.find(kind, namespace if kind.namespaced else None, name or "") is not None

    # ------------------------------------------------------------------ hooks: what objects declare

    async def written(self, kind: Kind, operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        if kind.kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
            self.ctl.runtime_applied(admission.check_model(kind, obj))
        elif kind.kind == "PersistentVolumeClaim" and operation == "CREATE":
            self._provision(kind, obj)
        elif kind.kind == "VolumeSnapshot" and operation == "CREATE":
            self._take_snapshot(kind, obj)
        elif kind.kind in ("TrainJob", "RayJob"):
            suspended = bool((obj.get("spec") or {}).get("suspend"))
            was_suspended = bool(((old or {}).get("spec") or {}).get("suspend"))
            if operation == "CREATE" and suspended:
                self._set_status(kind, obj, objects.trainjob_status(self.ctl.idle_summary(obj), suspended=True))
            elif operation == "CREATE" or (was_suspended and not suspended):
                try:
                    await self.ctl.start_job(admission.check_model(kind, obj))
                except ClusterError as exc:  # e.g. env from a ConfigMap that is not there
                    self.mirror.event(obj, "Warning", "CreateContainerConfigError", str(exc), "trainjob-controller")
                    self._set_status(kind, obj, {"conditions": [{
                        "type": "Failed", "status": "True", "reason": "CreateContainerConfigError",
                        "message": str(exc), "lastTransitionTime": objects.rfc3339(time.time())}]})
            elif suspended and not was_suspended:
                await self.ctl.stop_job(name)
                self._set_status(kind, obj, objects.trainjob_status(self.ctl.idle_summary(obj), suspended=True))
        elif kind.kind == "Pod" and operation == "CREATE":
            self.ctl.start_bare_pod(obj)

    def _provision(self, kind: Kind, obj: dict[str, Any]) -> None:
        """The claim's volume, then Bound. One with a dataSource stays Pending with the
        provisioner's ProvisioningFailed event while its source cannot be used (provisioner.py),
        else is Pending while the source's files are copied in the background (a pod mounting it
        waits, Controller.wait_for_volumes), as a create on a real cluster returns before the
        provisioner has made the volume."""
        meta = obj["metadata"]
        storage_class = (obj.get("spec") or {}).get("storageClassName") or STORAGE_CLASS
        claim = admission.check_model(kind, obj)
        if provisioner.data_source(obj) is None:
            self.ctl.claim_applied(claim)
            self._bound(kind, obj, storage_class)
            return
        key = (meta.get("namespace"), meta["name"])
        if key in self._provisioning:
            return  # its copy is under way
        self.mirror.event(obj, "Normal", "Provisioning", "External provisioner is provisioning volume for claim "
                          f'"{meta.get("namespace")}/{meta["name"]}"', DRIVER)
        try:
            contents, source = provisioner.contents(self, obj)
            if self.ctl.layout.volume_dir(meta["name"]).exists():
                raise ClusterError(f"volume {meta['name']!r} exists on this node already (PersistentVolumeClaims "
                                   "share one set of names across namespaces on the embedded cluster)")
        except provisioner.NotProvisionable as exc:
            self._not_provisioned(kind, obj, provisioner.failure(obj, storage_class, exc))
            return
        except ClusterError as exc:
            self._not_provisioned(kind, obj, f'failed to provision volume with StorageClass "{storage_class}": {exc}')
            return
        self._set_status(kind, obj, {"phase": "Pending"}, spec_extra={"storageClassName": storage_class})
        self._provisioning[key] = asyncio.get_running_loop().create_task(
            self._fill(kind, obj, claim, contents, source, storage_class), name=f"provision {key}")

    async def _fill(self, kind: Kind, obj: dict[str, Any], claim: Any, contents: Path, source: dict[str, Any],
                    storage_class: str) -> None:
        """The copy of a claim's source, then Bound; or the ProvisioningFailed event when the copy
        fails or the source was deleted meanwhile (the copy may be partial: it is dropped)."""
        meta = obj["metadata"]
        directory = self.ctl.layout.volume_dir(meta["name"])
        filled, problem = False, ""
        try:
            await self.ctl.fill_volume(meta["name"], contents)
            filled = True
            provisioner.check_kept(self, source)
        except provisioner.NotProvisionable as exc:
            problem = provisioner.failure(obj, storage_class, exc)
        except ClusterError as exc:  # the copy failed (no space left, say)
            problem = f'failed to provision volume with StorageClass "{storage_class}": {exc}'
        finally:
            self._provisioning.pop((meta.get("namespace"), meta["name"]), None)
        live = self.store.find(kind, meta.get("namespace"), meta["name"])
        if problem or live is None or live["metadata"].get("uid") != meta.get("uid"):
            if filled:
                shutil.rmtree(directory, ignore_errors=True)
            if problem and live is not None:
                self._not_provisioned(kind, live, problem)
            return
        self.ctl.claim_applied(claim)
        self._bound(kind, live, storage_class)
        self.mirror.event(live, "Normal", "ProvisioningSucceeded",
                          f"Successfully provisioned volume pvc-{meta['uid']}", DRIVER)

    def _bound(self, kind: Kind, obj: dict[str, Any], storage_class: str) -> None:
        spec = obj.get("spec") or {}
        self._set_status(kind, obj, {"phase": "Bound", "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
                                     "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {})
                                                  .get("storage", "1Gi")}},
                         spec_extra={"volumeName": f"pvc-{obj['metadata']['uid']}", "storageClassName": storage_class})

    def _not_provisioned(self, kind: Kind, obj: dict[str, Any], problem: str) -> None:
        self.mirror.event(obj, "Warning", "ProvisioningFailed", problem, DRIVER)
        self._set_status(kind, obj, {"phase": "Pending"},
                         spec_extra={"storageClassName": (obj.get("spec") or {}).get("storageClassName")
                                     or STORAGE_CLASS})
        self.ctl.volume_changed()  # pods waiting for it say why now

    def _take_snapshot(self, kind: Kind, obj: dict[str, Any]) -> None:
        """Taken at once (volumes.create_snapshot), so ready when the create returns; bound to its
        VolumeSnapshotContent as the snapshot controller binds them; then the claims that were
        waiting for it are provisioned. Its restoreSize is the source volume's capacity, as a CSI
        driver reports it (csi-hostpath: the volume's size): a claim of the source's size restores
        it, however full the volume (capacity is not enforced here)."""
        meta = obj["metadata"]
        snap = self.ctl.take_snapshot(admission.check_model(kind, obj))
        class_name = (obj.get("spec") or {}).get("volumeSnapshotClassName") or SNAPSHOT_CLASS
        content = f"snapcontent-{meta['uid']}"
        claim = self.store.find(self.kinds["PersistentVolumeClaim"], meta.get("namespace"),
                                obj["spec"]["source"]["persistentVolumeClaimName"]) or {}
        capacity = (((claim.get("status") or {}).get("capacity") or {}).get("storage")
                    or (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
                    or "1Gi")
        self.store.create(self.kinds["VolumeSnapshotContent"], {
            "metadata": {"name": content},
            "spec": {"deletionPolicy": "Delete", "driver": DRIVER, "volumeSnapshotClassName": class_name,
                     "source": {"volumeHandle": (claim.get("spec") or {}).get("volumeName") or ""},
                     "sourceVolumeMode": "Filesystem",
                     "volumeSnapshotRef": {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta["name"],
                                           "namespace": meta.get("namespace"), "uid": meta.get("uid")}},
            "status": {"readyToUse": True, "restoreSize": int(quantity(capacity)),
                       "creationTime": int(snap["created"] * 1e9), "snapshotHandle": meta["name"]}})
        self._set_status(kind, obj, {"readyToUse": True, "creationTime": objects.rfc3339(snap["created"]),
                                     "restoreSize": capacity, "boundVolumeSnapshotContentName": content},
                         spec_extra={"volumeSnapshotClassName": class_name})
        claims = self.kinds["PersistentVolumeClaim"]
        for waiting in self.store.list(claims, meta.get("namespace")):
            if ((waiting.get("status") or {}).get("phase") == "Pending"
                    and provisioner.names(waiting, kind.kind, meta["name"])):
                self._provision(claims, waiting)

    def _set_status(self, kind: Kind, obj: dict[str, Any], status: dict[str, Any],
                    spec_extra: dict[str, Any] | None = None) -> None:
        live = self.store.find(kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if live is None:
            return
        updated = {**live, "status": status}
        if spec_extra:
            updated["spec"] = {**(live.get("spec") or {}), **spec_extra}
        self.store.update(kind, updated)

    async def deleting(self, kind: Kind, obj: dict[str, Any], grace: int | None) -> dict[str, Any] | None:
        name = obj["metadata"]["name"]
        if kind.kind == "Pod":
            return self._delete_pod(kind, obj, grace)
        if kind.kind in ("TrainJob", "RayJob"):
            await self.ctl.delete_job(kind.kind, name)
        elif kind.kind == "PersistentVolumeClaim":
            self.ctl.delete_claim(name)
        elif kind.kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
            self.ctl.runtimes.pop((kind.kind, name), None)
        elif kind.kind == "VolumeSnapshot":
            self.ctl.delete_snapshot(name)
            content = ((obj.get("status") or {}).get("boundVolumeSnapshotContentName")) or ""
            if content and self.store.find(self.kinds["VolumeSnapshotContent"], None, content) is not None:
                self.store.delete(self.kinds["VolumeSnapshotContent"], None, content)
        elif kind.kind == "VolumeSnapshotContent":
            raise ApiError(403, "Forbidden", f'volumesnapshotcontents.{provisioner.SNAPSHOT_GROUP} "{name}" is '
                                             "forbidden: it goes with its VolumeSnapshot (delete that instead)")
        elif kind.kind == "Namespace":
            if name in SYSTEM_NAMESPACES:
                raise ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted')
            for other in self.registry.kinds:
                if other.namespaced and other.group != "metrics.k8s.io":
                    for item in self.store.list(other, name):
                        if await self.deleting(other, item, grace) is None and self.store.find(
                                other, name, item["metadata"]["name"]) is not None:
                            self.server.delete_cascade(other, item)
        return None

    def _delete_bare_pod(self, kind: Kind, obj: dict[str, Any], grace: int,
                         pod: "barepods.BarePod") -> dict[str, Any] | None:
        pod.terminate(max(grace, 0))
        if grace <= 0 or not pod.running():
            self.ctl.forget_bare_pod(pod.key)
            return None
        pod.task.add_done_callback(lambda _t: self.bare_pod_gone(pod.namespace, pod.name))
        return self._terminating(kind, obj, grace)

    def _terminating(self, kind: Kind, obj: dict[str, Any], grace: int) -> dict[str, Any]:
        """The pod as it shows while its process gets its grace period (kubectl: Terminating)."""
        meta = {**obj["metadata"], "deletionGracePeriodSeconds": grace,
                "deletionTimestamp": objects.rfc3339(time.time() + grace)}
        self.mirror.event(obj, "Normal", "Killing", "Stopping container", "kubelet")
        return self.store.update(kind, {**obj, "metadata": meta})

    def _delete_pod(self, kind: Kind, obj: dict[str, Any], grace: int | None) -> dict[str, Any] | None:
        """As the kubelet: grace 0 (`--force`) kills at once and the object goes; otherwise the
        pod is Terminating (deletionTimestamp) while it gets SIGTERM, SIGKILL after the grace
        period, and the object goes when its process has ended. Either way its group restarts."""
        name = obj["metadata"]["name"]
        if name == self.controller_pod and obj["metadata"].get("namespace") == objects.TRAINER_NAMESPACE:
            raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: it is the embedded cluster\'s controller '
                                             "process (kfcockpit cluster down stops it)")
        if grace is None:
            grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        bare = self.ctl.bare_pods.get(f"{obj['metadata']['namespace']}.{name}")
        if bare is not None:
            return self._delete_bare_pod(kind, obj, grace, bare)
        self.mirror.deleted_pods.add(name)
        if self.ctl.pod_finished(name):
            return None
        if grace <= 0:
            self.ctl.kill_pod(name)
            return None
        if not self.ctl.terminate_pod(name, grace):
            return None
        return self._terminating(kind, obj, grace)

    def streams_changed(self, open_streams: int) -> None:
        self.ctl.check_idle()  # a client watching through the API keeps the cluster up, as a socket client did

    async def pod_log(self, namespace: str, name: str, options: dict[str, str]) -> AsyncIterator[bytes]:
        async for chunk in pod_log.follow(self, namespace, name, options):
            yield chunk

    # ------------------------------------------------------------------ metrics.k8s.io

    def computed(self, kind: Kind, namespace: str | None) -> list[dict[str, Any]] | None:
        from backend.local import metrics

        if kind.kind == "NodeMetrics":
            return [metrics.node_metrics()]
        pods = self.store.list(self.kinds["Pod"], namespace)
        readings = (metrics.pod_metrics(p, self.ctl.pod_pid(p["metadata"]["name"], p["metadata"]["namespace"]))
                    for p in pods)
        return [m for m in readings if m is not None]


def _listen(port_file: Path) -> socket.socket:
    """A loopback listener, on the port this state root had before when it is free (so a
    kubeconfig read earlier still points at it), else on a new one."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        previous = int(port_file.read_text())
    except (OSError, ValueError):
        previous = 0
    try:
        sock.bind(("127.0.0.1", previous))
    except OSError:
        sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(False)
    port_file.write_text(str(sock.getsockname()[1]))
    return sock
