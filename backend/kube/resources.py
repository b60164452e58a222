"""The API paths of the kinds the cockpit touches, and apply/get/list/delete over them as plain
JSON (no client model classes: what the server sends is what the cockpit reads).

Apply is kubectl-like: create; if the object exists, compare the manifest with what is live
and either leave it ("unchanged") or merge-patch it ("configured").
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Any, Callable

from backend.cluster import InvalidResource, NotFound
from backend.kube.connection import AlreadyExists, Connection, MissingType


@dataclass(frozen=True)
class Kind:
    name: str
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool = True


KINDS = {k.name: k for k in (
    Kind("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    Kind("TrainingRuntime", "trainer.kubeflow.org", "v1alpha1", "trainingruntimes"),
    Kind("ClusterTrainingRuntime", "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", False),
    Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets"),
    Kind("RayJob", "ray.io", "v1", "rayjobs"),
    Kind("VolumeSnapshot", "snapshot.storage.k8s.io", "v1", "volumesnapshots"),
    Kind("VolumeSnapshotClass", "snapshot.storage.k8s.io", "v1", "volumesnapshotclasses", False),
    Kind("StorageClass", "storage.k8s.io", "v1", "storageclasses", False),
    Kind("Job", "batch", "v1", "jobs"),  # read only: a JobSet's Jobs (explain)
    Kind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims"),
    Kind("Pod", "", "v1", "pods"),
    Kind("Node", "", "v1", "nodes", False),
    Kind("Service", "", "v1", "services"),  # read only: a JobSet's headless Service (explain)
    Kind("Event", "", "v1", "events"),
    Kind("PodMetrics", "metrics.k8s.io", "v1beta1", "pods"),  # read only: kubectl top pod
)}

FIELD_MANAGER = "kfcockpit"


_OBJECT_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def contains(live: Any, desired: Any) -> bool:
    """Every field the manifest sets has that value in the live object (servers add defaults)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and contains(live[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(live, list) and len(live) == len(desired) and all(
            contains(a, b) for a, b in zip(live, desired))
    return live == desired or str(live) == str(desired)


# Core kinds use CoreV1Api's `<op>_namespaced_<suffix>` methods (`<op>_<suffix>` for a cluster's
# Node, `list_<suffix>_for_all_namespaces` across namespaces), the rest CustomObjectsApi.
_CORE = {"Pod": "pod", "PersistentVolumeClaim": "persistent_volume_claim", "Event": "event", "Node": "node",
         "Service": "service"}
ALL_NAMESPACES = "*"  # a `namespace` for a list (and watch) across every namespace
_CORE_OP = {"get": "read", "list": "list", "create": "create", "patch": "patch", "delete": "delete"}


class Resources:
    def __init__(self, conn: Connection) -> None:
        from kubernetes import client

        self.conn = conn
        self.core = client.CoreV1Api(conn.api)
        self.custom = client.CustomObjectsApi(conn.api)

    @property
    def namespace(self) -> str:
        return self.conn.namespace

    def bind(self, op: str, kind: str, name: str | None = None, body: Any = None,
             namespace: str | None = None) -> tuple[Callable[..., Any], tuple]:
        """The client method for `op` (get, list, create, patch, delete) on `kind` and its
        positional arguments; ListWatch uses the `list` one."""
        k = KINDS[kind]
        ns = namespace or self.namespace
        if kind in _CORE and op == "list" and ns == ALL_NAMESPACES:
            return getattr(self.core, f"list_{_CORE[kind]}_for_all_namespaces"), ()
        if kind in _CORE and not k.namespaced:
            fn = getattr(self.core, f"{_CORE_OP[op]}_{_CORE[kind]}")
            return fn, {"list": (), "create": (body,), "get": (name,), "patch": (name, body), "delete": (name,)}[op]
        if kind in _CORE:
            fn = getattr(self.core, f"{_CORE_OP[op]}_namespaced_{_CORE[kind]}")
            args = {"list": (ns,), "create": (ns, body), "get": (name, ns),
                    "patch": (name, ns, body), "delete": (name, ns)}[op]
            return fn, args
        scope = "namespaced" if k.namespaced else "cluster"
        fn = getattr(self.custom, f"{op}_{scope}_custom_object")
        base = (k.group, k.version, ns, k.plural) if k.namespaced else (k.group, k.version, k.plural)
        return fn, base + {"list": (), "create": (body,), "get": (name,),
                           "patch": (name, body), "delete": (name,)}[op]

    async def _json(self, op: str, kind: str, name: str | None = None, body: Any = None,
                    namespace: str | None = None, **kwargs: Any) -> Any:
        if name is not None and not _OBJECT_NAME.match(name):
            # It would become a URL path: "../x" must not reach another resource (apimachinery's
            # IsDNS1123Subdomain, which every object name here meets).
            raise InvalidResource(f"{kind} name {name!r} is not a valid name: lower-case letters, digits, "
                                  "'-' and '.', starting and ending with a letter or digit")
        fn, args = self.bind(op, kind, name, body, namespace)
        if op == "delete" and body is not None:  # DeleteOptions go as a keyword, not positionally
            kwargs["body"] = body
        what = f"{kind} {name}" if name else f"{KINDS[kind].plural} in namespace {namespace or self.namespace}"
        try:
            return await self.conn.call_json(fn, *args, what=what, **kwargs)
        except MissingType:
            raise MissingType(missing_type(kind)) from None

    # ------------------------------------------------------------------ one-shot calls

    async def list(self, kind: str, label_selector: str | None = None, namespace: str | None = None) -> list[dict]:
        selector = {"label_selector": label_selector} if label_selector else {}
        body = await self._json("list", kind, namespace=namespace, **selector)
        return body.get("items") or []

    async def get(self, kind: str, name: str) -> dict:
        return await self._json("get", kind, name)

    async def find(self, kind: str, name: str) -> dict | None:
        try:
            return await self.get(kind, name)
        except NotFound:
            return None

    async def create(self, manifest: dict) -> dict:
        return await self._json("create", manifest["kind"], manifest["metadata"]["name"], manifest,
                                field_manager=FIELD_MANAGER)

    async def patch(self, kind: str, name: str, patch: dict) -> dict:
        """A JSON merge patch (CoreV1Api sends a strategic merge patch for a dict body)."""
        return await self._json("patch", kind, name, patch, field_manager=FIELD_MANAGER)

    async def delete(self, kind: str, name: str, grace_period: int | None = None) -> None:
        from kubernetes import client

        if grace_period is None:
            await self._json("delete", kind, name)
        else:
            await self._json("delete", kind, name, client.V1DeleteOptions(grace_period_seconds=grace_period),
                             grace_period_seconds=grace_period)

    # ------------------------------------------------------------------ apply

    async def apply(self, manifest: dict) -> str:
        """Create, or bring the live object to the manifest; '<kind>/<name> created|configured|unchanged'."""
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        if kind not in KINDS:
            raise InvalidResource(f"{kind} {name}: the cockpit does not apply this kind")
        manifest = dict(manifest)
        if KINDS[kind].namespaced:
            declared = manifest["metadata"].get("namespace")
            if declared and declared != self.namespace:
                raise InvalidResource(f"{kind} {name} declares namespace {declared!r}, but the cockpit "
                                      f"works in {self.namespace!r} (pass --namespace {declared})")
            manifest["metadata"] = dict(manifest["metadata"], namespace=self.namespace)
        try:
            await self.create(manifest)
            return f"{kind.lower()}/{name} created"
        except AlreadyExists:
            pass
        live = await self.get(kind, name)
        desired = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "status")}
        if contains(live, desired):
            return f"{kind.lower()}/{name} unchanged"
        patch = {k: v for k, v in desired.items() if k != "metadata"}
        meta = {k: manifest["metadata"][k] for k in ("labels", "annotations") if k in manifest["metadata"]}
        if meta:
            patch["metadata"] = meta
        await self.patch(kind, name, patch)
        return f"{kind.lower()}/{name} configured"


INSTALL = "manifests/install/install.sh"
_INSTALLED_BY = {
    "trainer.kubeflow.org": f"Kubeflow Trainer is not installed: {INSTALL} trainer",
    "jobset.x-k8s.io": f"JobSet is not installed (it comes with Kubeflow Trainer): {INSTALL} trainer",
    "snapshot.storage.k8s.io": f"the VolumeSnapshot CRDs are not installed: {INSTALL} snapshots",
    "ray.io": f"KubeRay is not installed: {INSTALL} kuberay",
    "metrics.k8s.io": "metrics-server is not installed (kubectl top needs it too)",
}


def missing_type(kind: str) -> str:
    """One line for a kind whose CRD the cluster does not have, with the command that adds it."""
    k = KINDS[kind]
    hint = _INSTALLED_BY.get(k.group)
    return f"the cluster has no {k.plural}.{k.group}: {hint}" if hint else f"the cluster has no {k.plural}"
