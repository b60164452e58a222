"""Objects and a fake cluster for the admission library's tests: each test starts from a valid
object, changes one thing, and admits it through `crds.admit` as the API would."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from backend.local.registry import crds
from backend.local.registry.kinds import Kinds
from backend.local.registry.status import ApiError
from backend.local.registry.strategies import strategies
from backend.local.registry.strategy import Strategy

REPO = Path(__file__).resolve().parents[3]
NOW = "2026-01-02T03:04:05Z"


def manifest(path: str, index: int = 0, namespace: str | None = "default") -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((REPO / path).read_text()) if d]
    obj = docs[index]
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj


def trainjob(**spec: Any) -> dict[str, Any]:
    body = {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}}
    body.update(spec)
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": "default"}, "spec": body}


def jobset(**spec: Any) -> dict[str, Any]:
    body = {"replicatedJobs": [{"name": "node", "template": {"spec": {"parallelism": 2, "completions": 2,
                                                                      "template": {"spec": {"containers": [
                                                                          {"name": "node", "image": "x"}]}}}}}]}
    body.update(spec)
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "default"}, "spec": body}


STRATEGIES = strategies(Kinds())


class Cluster:
    """What the webhooks read: stored objects by (kind, namespace, name)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.put(manifest("manifests/embedded/torch-distributed.yaml", 2, namespace=None))
        self.put(manifest("manifests/runtime.yaml"))

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace"), meta["name"])] = obj
        return obj

    def lookup(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def find(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.lookup(kind, namespace, name)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for (k, ns, _), o in self.objects.items() if k == kind and (namespace is None or ns == namespace)]

    def admit(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
        """The whole admission the generic registry runs: the CRD's, around the kind's webhooks
        as its strategy's row registers them."""
        return crds.admit(obj["kind"], "UPDATE" if old else "CREATE", obj, copy.deepcopy(old) if old else None,
                          STRATEGIES.get(obj["kind"], Strategy()).webhooks, self, now=NOW)

    def refused(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> ApiError:
        with pytest.raises(ApiError) as caught:
            self.admit(obj, old)
        return caught.value


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()
