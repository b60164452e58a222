"""The resource types the embedded cluster stores and serves, as discovery describes them.

Group, version, plural, scope and short names are those of a kind cluster with Kubeflow Trainer
v2.3.0 (its CRDs under manifests/base/crds), JobSet v0.12 (jobset.x-k8s.io/v1alpha2), KubeRay
v1.7 (ray.io/v1), the CSI snapshotter (snapshot.storage.k8s.io/v1) and metrics-server
(metrics.k8s.io/v1beta1). `columns` are the printer columns `kubectl get` shows (the CRDs'
additionalPrinterColumns, or the built-in printers' for core kinds: tables.py fills them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

READ = ("get", "list", "watch")
ALL = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Column:
    name: str
    type: str = "string"
    json_path: str = ""  # for custom resources; core kinds compute their cells in tables.py
    priority: int = 0  # 1: only with -o wide
    format: str = ""


@dataclass(frozen=True)
class Kind:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL
    subresources: tuple[str, ...] = ()  # "status", "log", ...
    columns: tuple[Column, ...] = ()
    persisted: bool = True  # kept on disk across controller restarts (else re-derived)
    # A write is fsynced before it is acknowledged. Off for what only controllers write (pods,
    # Jobs, JobSets): a machine crash may lose their newest state, which the controllers
    # re-derive, and an fsync would sit on every restart's path.
    durable: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> str:
        """Unique among kinds: metrics.k8s.io `pods` is not core `pods`."""
        return f"{self.group}/{self.plural}"

    def path_prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


AGE = Column("Age", "date", ".metadata.creationTimestamp")

CORE = [
    Kind("", "v1", "Namespace", "namespaces", False, ("ns",), subresources=("status", "finalize")),
    Kind("", "v1", "Pod", "pods", True, ("po",), ("all",), subresources=("status", "log", "eviction"),
         durable=False),
    Kind("", "v1", "Event", "events", True, ("ev",), persisted=False),  # an hour's history upstream; here, this run's
    Kind("", "v1", "Node", "nodes", False, ("no",), subresources=("status",), persisted=False),
    Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("pvc",), subresources=("status",)),
    Kind("", "v1", "PersistentVolume", "persistentvolumes", False, ("pv",), subresources=("status",)),
    Kind("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
    Kind("", "v1", "Secret", "secrets", True),
    Kind("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",)),
    Kind("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, ("sc",)),
    Kind("batch", "v1", "Job", "jobs", True, (), ("all",), subresources=("status",), durable=False),
    # A kubelet's heartbeat (kube-node-lease), renewed every few seconds: never kept on disk.
    Kind("coordination.k8s.io", "v1", "Lease", "leases", True, (), persisted=False),
    Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",), subresources=("status",)),
]

# What a subresource of another kind than its parent's takes and answers (discovery names it so:
# kubectl drain looks for pods/eviction of kind policy/v1 Eviction before it evicts).
SUBRESOURCE_KINDS = {"log": ("", "v1", "Pod", ("get",)), "eviction": ("policy", "v1", "Eviction", ("create",))}

TRAINER = [
    Kind("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", True, (), subresources=("status",),
         columns=(Column("State", "string", ".status.conditions[-1:].type"), AGE)),
    Kind("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes", True, (),
         columns=(AGE,)),
    Kind("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False, (),
         columns=(AGE,)),
    Kind("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True, (), subresources=("status",),
         columns=(Column("TerminalState", "string", ".status.terminalState"),
                  Column("Restarts", "string", ".status.restarts"),
                  Column("Completed", "string", ".status.conditions[?(@.type==\"Completed\")].status"),
                  Column("Suspended", "string", ".spec.suspend"), AGE),
         durable=False),
    Kind("ray.io", "v1", "RayJob", "rayjobs", True, (), ("all",), subresources=("status",),
         columns=(Column("Job Status", "string", ".status.jobStatus"),
                  Column("Deployment Status", "string", ".status.jobDeploymentStatus"),
                  Column("Ray Cluster Name", "string", ".status.rayClusterName"),
                  Column("Start Time", "string", ".status.startTime"),
                  Column("End Time", "string", ".status.endTime"), AGE)),
    Kind("snapshot.storage.k8s.io", "v1", "VolumeSnapshot", "volumesnapshots", True, ("vs",),
         subresources=("status",),
         columns=(Column("ReadyToUse", "boolean", ".status.readyToUse"),
                  Column("SourcePVC", "string", ".spec.source.persistentVolumeClaimName"),
                  Column("RestoreSize", "string", ".status.restoreSize"),
                  Column("SnapshotClass", "string", ".spec.volumeSnapshotClassName"),
                  Column("CreationTime", "date", ".status.creationTime"), AGE)),
    Kind("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass", "volumesnapshotclasses", False,
         ("vsclass", "vsclasses"),
         columns=(Column("Driver", "string", ".driver"), Column("DeletionPolicy", "string", ".deletionPolicy"),
                  AGE)),
    # external-snapshotter client/config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml
    Kind("snapshot.storage.k8s.io", "v1", "VolumeSnapshotContent", "volumesnapshotcontents", False,
         ("vsc", "vscs"), subresources=("status",),
         columns=(Column("ReadyToUse", "boolean", ".status.readyToUse"),
                  Column("RestoreSize", "integer", ".status.restoreSize"),
                  Column("DeletionPolicy", "string", ".spec.deletionPolicy"),
                  Column("Driver", "string", ".spec.driver"),
                  Column("VolumeSnapshotClass", "string", ".spec.volumeSnapshotClassName"),
                  Column("VolumeSnapshot", "string", ".spec.volumeSnapshotRef.name"),
                  Column("VolumeSnapshotNamespace", "string", ".spec.volumeSnapshotRef.namespace"), AGE)),
]

METRICS = [
    Kind("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", True, verbs=("get", "list"), persisted=False),
    Kind("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", False, verbs=("get", "list"), persisted=False),
]

KINDS: list[Kind] = CORE + TRAINER + METRICS


@dataclass(eq=False)  # hashable by identity: documents built from it are cached
class Kinds:
    kinds: list[Kind] = field(default_factory=lambda: list(KINDS))

    def by_path(self, group: str, version: str, plural: str) -> Kind | None:
        for kind in self.kinds:
            if (kind.group, kind.version, kind.plural) == (group, version, plural):
                return kind
        return None

    def by_key(self, key: str) -> Kind:
        return next(k for k in self.kinds if k.key == key)

    def named(self, kind_name: str) -> Kind:
        """The stored kind of this name (kind names are unique among them; metrics' are computed)."""
        return self._named[kind_name]

    @functools.cached_property
    def _named(self) -> dict[str, Kind]:
        return {k.kind: k for k in self.kinds if k.group != "metrics.k8s.io"}

    def stored(self) -> list[Kind]:
        """The kinds objects are kept of (not metrics.k8s.io's, computed when read)."""
        return list(self._named.values())

    def by_kind(self, api_version: str, kind_name: str) -> Kind | None:
        for kind in self.kinds:
            if kind.api_version == api_version and kind.kind == kind_name:
                return kind
        return None

    def groups(self) -> dict[str, list[str]]:
        """Named groups → their versions, in the order served (the core group excluded)."""
        found: dict[str, list[str]] = {}
        for kind in self.kinds:
            if kind.group and kind.version not in found.setdefault(kind.group, []):
                found[kind.group].append(kind.version)
        return found

    def in_version(self, group: str, version: str) -> list[Kind]:
        return [k for k in self.kinds if (k.group, k.version) == (group, version)]
