"""What the fake serves and the rules every verb shares: the collections (by api prefix and
plural), the token, timestamps, selectors and metav1.Status bodies. No state."""

from __future__ import annotations

import time
from datetime import datetime, timezone

# (api prefix, plural) -> (kind, namespaced)
SERVED = {
    ("api/v1", "pods"): ("Pod", True),
    ("api/v1", "persistentvolumeclaims"): ("PersistentVolumeClaim", True),
    ("api/v1", "services"): ("Service", True),
    ("apis/batch/v1", "jobs"): ("Job", True),
    ("apis/trainer.kubeflow.org/v1alpha1", "trainjobs"): ("TrainJob", True),
    ("apis/trainer.kubeflow.org/v1alpha1", "trainingruntimes"): ("TrainingRuntime", True),
    ("apis/trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes"): ("ClusterTrainingRuntime", False),
    ("apis/jobset.x-k8s.io/v1alpha2", "jobsets"): ("JobSet", True),
    ("apis/ray.io/v1", "rayjobs"): ("RayJob", True),
    ("apis/snapshot.storage.k8s.io/v1", "volumesnapshots"): ("VolumeSnapshot", True),
    ("apis/snapshot.storage.k8s.io/v1", "volumesnapshotclasses"): ("VolumeSnapshotClass", False),
    ("apis/snapshot.storage.k8s.io/v1", "volumesnapshotcontents"): ("VolumeSnapshotContent", False),
    ("apis/storage.k8s.io/v1", "storageclasses"): ("StorageClass", False),
    ("apis/metrics.k8s.io/v1beta1", "pods"): ("PodMetrics", True),  # metrics-server: tests only list it
}

PODS = ("api/v1", "pods")
PODMETRICS = ("apis/metrics.k8s.io/v1beta1", "pods")
TRAINJOBS = ("apis/trainer.kubeflow.org/v1alpha1", "trainjobs")
JOBSETS = ("apis/jobset.x-k8s.io/v1alpha2", "jobsets")

TOKEN = "fake-token"


def now_rfc3339(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def api_version(key: tuple[str, str]) -> str:
    """"api/v1" -> "v1", "apis/ray.io/v1" -> "ray.io/v1"."""
    return key[0].split("/", 1)[1]


def query_flag(query: dict[str, str], name: str) -> bool:
    """A boolean query parameter (watch, follow, timestamps, allowWatchBookmarks) as set."""
    return query.get(name, "").lower() in ("true", "1")


def status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    """An error as the API server answers it (metav1.Status)."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    return body


def matches(obj: dict, ns: str, query: dict[str, str]) -> bool:
    """Whether a list or watch with this namespace and query (labelSelector, fieldSelector) shows `obj`."""
    meta = obj.get("metadata") or {}
    if ns and meta.get("namespace") != ns:
        return False
    if query.get("labelSelector") and not _labels_match(query["labelSelector"], meta.get("labels") or {}):
        return False
    if query.get("fieldSelector") and not _fields_match(query["fieldSelector"], obj):
        return False
    return True


def _terms(selector: str) -> list[str]:
    """The comma-joined terms, a set's commas (`a in (x,y)`) kept inside it."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    return [t.strip() for t in [*terms, current] if t.strip()]


def _labels_match(selector: str, labels: dict) -> bool:
    """=, ==, !=, in, exists and !exists terms, all of which must hold."""
    for term in _terms(selector):
        if " in (" in term:
            key, values = term.split(" in (", 1)
            if labels.get(key.strip()) not in {v.strip() for v in values.rstrip(")").split(",")}:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _fields_match(selector: str, obj: dict) -> bool:
    """metadata.name and metadata.namespace, the field selectors every kind supports."""
    meta = obj.get("metadata") or {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, _, value = term.replace("==", "=").partition("=")
        if key == "metadata.name" and meta.get("name") != value:
            return False
        if key == "metadata.namespace" and meta.get("namespace") != value:
            return False
    return True
