"""The namespace controller in-process (kubernetes pkg/controller/namespace/deletion): a deleted
namespace is Terminating while its content goes, says what is left in its conditions, never
fails halfway (a pod still ending only makes it wait), and goes last; another namespace's
objects are untouched."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from backend.local.controllers.gc import GarbageCollector
from backend.local.controllers.namespace import NamespaceController
from backend.local.controllers.volumes import DRIVER, Provisioner
from backend.local.registry.events import Events
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


def _every_byte(directory: Path) -> str:
    """One digest of a tree: each file's path, mode and bytes."""
    digest = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            digest.update(f"{path.relative_to(directory)} {path.stat().st_mode}\n".encode() + path.read_bytes())
    return digest.hexdigest()


async def _copy(argv: list[str], output: Path) -> int:  # the provisioner copies no data source here
    raise AssertionError(f"no copy expected: {argv}")


async def test_deleting_a_namespace_keeps_every_byte_of_another_namespaces_volumes(tmp_path):
    """The same claim name in two namespaces is two volumes; one namespace deleted takes its own
    volume's files (reclaim Delete) and leaves the other's as they were, byte for byte."""
    client = plane()
    client.create("StorageClass", {"metadata": {"name": "standard", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": DRIVER, "reclaimPolicy": "Delete"})
    volumes = tmp_path / "volumes"
    provisioner = Provisioner(client, Events(client, host="test").recorder(DRIVER), volumes, tmp_path / "snapshots",
                              _copy)
    async with running(provisioner, NamespaceController(client), GarbageCollector(client)):
        dirs = {}
        for namespace in ("team-a", "team-b"):
            client.create("Namespace", {"metadata": {"name": namespace}})
            client.create("PersistentVolumeClaim", {
                "metadata": {"name": "checkpoints", "namespace": namespace},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
            claim = await until(client, "PersistentVolumeClaim", namespace, "checkpoints",
                                lambda o: (o.get("status") or {}).get("phase") == "Bound")
            dirs[namespace] = volumes / namespace / claim["spec"]["volumeName"]
            (dirs[namespace] / "run").mkdir()
            (dirs[namespace] / "run" / "ckpt-step-000005.pt").write_bytes(os.urandom(4096))
            (dirs[namespace] / "metrics.json").write_text(f'{{"namespace": "{namespace}"}}')
        assert dirs["team-a"] != dirs["team-b"]
        before = _every_byte(dirs["team-b"])

        client.delete("Namespace", None, "team-a")
        await until(client, "Namespace", None, "team-a", gone)
        assert not dirs["team-a"].exists()  # its claim went, and its volume with it
    assert _every_byte(dirs["team-b"]) == before
    assert (client.get("PersistentVolumeClaim", "team-b", "checkpoints")["status"] or {})["phase"] == "Bound"
