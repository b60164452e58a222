"""The embedded cluster's Kubernetes API: the controller's side of backend/local/apiserver.

`ClusterApi` owns the object store and the HTTPS listener (127.0.0.1 only, bearer token) and
ties them to the controller through the server's hooks:
- what every cluster has (bootstrap.py);
- admission: upstream defaults and rules, then the cockpit's models (admission.py);
- written / deleting: what an object declares is done by the controller (a TrainJob runs, a
  PVC gets its directory, filled from its dataSource, a VolumeSnapshot is taken and bound to its
  VolumeSnapshotContent: csi.py; a pod is deleted as the kubelet does: pod_status.py);
- the mirror: every pod and job change a runner publishes becomes the Pod, TrainJob status and
  JobSet objects clients read and watch (mirror.py, objects.py);
- pods/log from the pods' log files, followed on the runners' log events (pod_log.py);
- metrics.k8s.io from /proc (metrics.py).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import ssl
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator

from aiohttp import web

from backend.errors import ClusterError
from functools import partial

from backend.local import barepods, bootstrap, csi, objects, pod_log, pod_status, provisioner
from backend.local.registry import admission
from backend.local.registry.admission import (
    LIMITS_WARNING,
    check_model,
    default_trainjob,
    immutable_spec,
    normalize_data_sources,
    validate_claim_data_source,
    validate_trainjob,
)
from backend.local.registry.status import conflict, invalid, refused
from backend.local.apiserver import credentials, schemas
from backend.local.registry.kinds import Kind, Kinds
from backend.local.apiserver.server import ApiServer, Hooks
from backend.local.registry.status import ApiError
from backend.local.registry.store import Store
from backend.local.mirror import Mirror

if TYPE_CHECKING:
    from backend.local.controller import Controller

log = logging.getLogger("kfcockpit.api")


class ClusterApi(Hooks):
    def __init__(self, ctl: "Controller", capacity: dict[str, float]):
        self.ctl = ctl
        self.capacity = capacity
        self.registry = Kinds()
        self.store = Store(self.registry, ctl.layout.root / "objects")
        self.kinds = {k.kind: k for k in self.registry.kinds if k.group != "metrics.k8s.io"}
        self.credentials: credentials.Credentials | None = None
        self.server: ApiServer | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.mirror = Mirror(self)
        self.controller_pod = ""
        self.provisioning: dict[tuple[str | None, str], asyncio.Task] = {}  # claims whose volume is being copied

    # ------------------------------------------------------------------ start / stop

    def load(self) -> None:
        """Stored objects, and what every cluster has from its first start."""
        first_start = not self.store.directory.exists()
        self.store.load()
        self.controller_pod = bootstrap.ensure(self, first_start)

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
        return admit(self, kind, operation, obj, old)

    # ------------------------------------------------------------------ what pods read

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

    # ------------------------------------------------------------------ hooks: what objects declare

    async def written(self, kind: Kind, operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        if kind.kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
            self.ctl.runtime_applied(admission.check_model(kind, obj))
        elif kind.kind == "PersistentVolumeClaim" and operation == "CREATE":
            csi.provision(self, kind, obj)
        elif kind.kind == "VolumeSnapshot" and operation == "CREATE":
            csi.take_snapshot(self, kind, obj)
        elif kind.kind in ("TrainJob", "RayJob"):
            suspended = bool((obj.get("spec") or {}).get("suspend"))
            was_suspended = bool(((old or {}).get("spec") or {}).get("suspend"))
            if operation == "CREATE" and suspended:
                self.set_status(kind, obj, objects.trainjob_status(self.ctl.idle_summary(obj), suspended=True))
            elif operation == "CREATE" or (was_suspended and not suspended):
                try:
                    await self.ctl.start_job(admission.check_model(kind, obj))
                except ClusterError as exc:  # e.g. env from a ConfigMap that is not there
                    self.mirror.event(obj, "Warning", "CreateContainerConfigError", str(exc), "trainjob-controller")
                    self.set_status(kind, obj, {"conditions": [{
                        "type": "Failed", "status": "True", "reason": "CreateContainerConfigError",
                        "message": str(exc), "lastTransitionTime": objects.rfc3339(time.time())}]})
            elif suspended and not was_suspended:
                await self.ctl.stop_job(name)
                self.set_status(kind, obj, objects.trainjob_status(self.ctl.idle_summary(obj), suspended=True))
        elif kind.kind == "Pod" and operation == "CREATE":
            self.ctl.start_bare_pod(obj)

    def set_status(self, kind: Kind, obj: dict[str, Any], status: dict[str, Any],
                   spec_extra: dict[str, Any] | None = None) -> None:
        """Set the stored object's status (and `spec_extra` fields of its spec), if it is still there."""
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
            return pod_status.delete(self, kind, obj, grace)
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
            if name in bootstrap.SYSTEM_NAMESPACES:
                raise ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted')
            for other in self.registry.kinds:
                if other.namespaced and other.group != "metrics.k8s.io":
                    for item in self.store.list(other, name):
                        if await self.deleting(other, item, grace) is None and self.store.find(
                                other, name, item["metadata"]["name"]) is not None:
                            self.server.delete_cascade(other, item)
        return None

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


# ---------------------------------------------------------------- admission of this controller

_RUN_BY_CONTROLLERS = ("JobSet", "Node")
MODELLED = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "PersistentVolumeClaim", "VolumeSnapshot",
            "RayJob")

def admit(api: ClusterApi, kind: Kind, operation: str, obj: dict[str, Any],
          old: dict[str, Any] | None) -> list[str]:
    """The API's admission (`Hooks.admit`): default and validate `obj` in place, against the
    rules above and what the cluster holds (jobs' names, claims, runtimes); returns warnings."""
    if operation == "CREATE" and kind.kind in _RUN_BY_CONTROLLERS:
        raise refused(f"the embedded cluster creates {kind.plural} itself (for TrainJobs and RayJobs) and does not "
                      f"run {kind.plural} created through the API: apply a TrainJob instead")
    if kind.kind == "Namespace" and operation == "CREATE":
        obj.setdefault("status", {"phase": "Active"})
    if kind.kind == "VolumeSnapshotContent" and operation == "CREATE":
        raise refused("the embedded cluster makes a VolumeSnapshotContent for each VolumeSnapshot it takes; "
                      "pre-provisioned snapshot contents are not supported: create a VolumeSnapshot instead")
    if kind.kind == "PersistentVolumeClaim" and operation == "CREATE":
        normalize_data_sources(obj.setdefault("spec", {}))
        validate_claim_data_source(kind, obj)
    warnings = []
    if kind.kind == "Pod" and operation == "CREATE":
        _default_pod(kind, obj)
        if any((c.get("resources") or {}).get("limits") for c in obj["spec"].get("containers") or []):
            warnings.append(LIMITS_WARNING)
    if kind.kind == "Secret":  # stringData is write-only: merged into data (core/v1 Secret)
        obj["type"] = obj.get("type") or "Opaque"
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(str(value).encode()).decode()
    if kind.kind == "TrainJob":
        default_trainjob(obj)
        validate_trainjob(kind, obj, old, partial(_runtime_exists, api))
    if kind.kind not in MODELLED:
        return warnings
    if old is not None and kind.kind in ("TrainJob", "RayJob"):
        immutable_spec(kind, obj, old)
    if old is not None and kind.kind == "VolumeSnapshot" and obj.get("spec") != old.get("spec"):
        raise invalid(kind.kind, obj["metadata"]["name"], [("spec.source", "Invalid value: field is immutable")],
                      kind.group)
    resource = check_model(kind, obj)
    if operation == "CREATE" and kind.kind in ("TrainJob", "RayJob"):
        name = obj["metadata"]["name"]
        # The same job again is the store's AlreadyExists (what `apply` expects), not this.
        taken = name in api.ctl.runners and api.store.find(kind, obj["metadata"]["namespace"], name) is None
        if taken:
            raise conflict(kind.plural, name, f"a {api.ctl.runners[name].kind} of that name exists (jobs share "
                           "one set of names across namespaces on the embedded cluster)", kind.group)
        api.ctl.check_job(resource)
        for claim, _ in resource.volume_mounts():
            if api.store.find(api.kinds["PersistentVolumeClaim"], obj["metadata"]["namespace"], claim) is None:
                raise invalid(kind.kind, name, [("spec", f"PersistentVolumeClaim {claim!r} not found: apply it "
                                                 "first (kubectl apply -f manifests/volume.yaml)")], kind.group)
    if kind.kind == "TrainJob" and (((obj.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode")
                                    or {}).get("limits"):
        warnings.append(LIMITS_WARNING)
    if operation == "CREATE" and kind.kind == "VolumeSnapshot":
        claim = resource.spec.source.persistent_volume_claim_name
        if api.store.find(api.kinds["PersistentVolumeClaim"], obj["metadata"]["namespace"], claim) is None:
            raise invalid(kind.kind, obj["metadata"]["name"],
                          [("spec.source.persistentVolumeClaimName",
                            f"Not found: volume {claim!r} not found (apply its PersistentVolumeClaim first)")],
                          kind.group)
    return warnings


def _default_pod(kind: Kind, obj: dict[str, Any]) -> None:
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


def _runtime_exists(api: ClusterApi, kind_name: str, name: str, namespace: str | None) -> bool:
    kind = api.kinds.get(kind_name or "")
    if kind is None or kind.kind not in ("TrainingRuntime", "ClusterTrainingRuntime"):
        return False
    return api.store.find(kind, namespace if kind.namespaced else None, name or "") is not None
