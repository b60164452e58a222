"""The namespace controller in-process (kubernetes pkg/controller/namespace/deletion): a deleted
namespace is Terminating while its content goes, says what is left in its conditions, never
fails halfway (a pod still ending only makes it wait), and goes last; another namespace's
objects are untouched."""

from __future__ import annotations

from backend.local.controllers.namespace import NamespaceController
from tests.controlplane import condition, gone, plane, running, until


def _pod(client, namespace: str, name: str) -> None:
    client.create("Pod", {"metadata": {"name": name, "namespace": namespace},
                          "spec": {"containers": [{"name": "c", "command": ["sleep", "9"]}]}})
    client.bind(namespace, name, "node-1")


async def test_a_namespace_empties_then_goes_and_leaves_others_alone():
    client = plane()
    for namespace in ("team-a", "team-b"):
        client.create("Namespace", {"metadata": {"name": namespace}})
        client.create("ConfigMap", {"metadata": {"name": "settings", "namespace": namespace}, "data": {"a": "1"}})
        _pod(client, namespace, "worker")
    async with running(NamespaceController(client)):
        client.delete("Namespace", None, "team-a")
        # the bound pod is ending (its grace period): the rest went, the namespace says what waits
        ns = await until(client, "Namespace", None, "team-a",
                         lambda o: condition(o, "NamespaceContentRemaining") is not None)
        assert "pods has 1 resource instances" in condition(ns, "NamespaceContentRemaining")["message"]
        assert ns["status"]["phase"] == "Terminating"
        assert client.get("ConfigMap", "team-a", "settings") is None
        assert client.get("Pod", "team-a", "worker")["metadata"]["deletionTimestamp"]

        client.delete("Pod", "team-a", "worker", grace=0)  # its kubelet saw it end
        await until(client, "Namespace", None, "team-a", gone)
    assert client.get("ConfigMap", "team-b", "settings") is not None
    assert not client.get("Pod", "team-b", "worker")["metadata"].get("deletionTimestamp")
