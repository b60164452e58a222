"""The garbage collector in-process against a real registry (kubernetes
pkg/controller/garbagecollector): background deletes the dependents after their owner, orphan
keeps them and removes the reference, foreground keeps the owner (foregroundDeletion) until the
dependents that block it are gone; a dependent whose owner went while no collector ran goes at
its start."""

from __future__ import annotations

from backend.local.controllers.gc import GarbageCollector
from backend.local.registry.strategy import FOREGROUND_FINALIZER
from tests.controlplane import gone, plane, running, until


def _owner(client, name: str = "owner") -> dict:
    return client.create("ConfigMap", {"metadata": {"name": name, "namespace": "default"}})


def _dependent(client, owner: dict, name: str, block: bool = True, **meta) -> dict:
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": block}
    return client.create("Secret", {"metadata": {"name": name, "namespace": "default", "ownerReferences": [ref],
                                                 **meta}})


async def test_background_deletes_the_dependents_after_their_owner():
    client = plane()
    owner = _owner(client)
    _dependent(client, owner, "a")
    _dependent(client, owner, "b")
    async with running(GarbageCollector(client)):
        assert client.delete("ConfigMap", "default", "owner", propagation="Background") is None
        for name in ("a", "b"):
            await until(client, "Secret", "default", name, gone)


async def test_orphan_keeps_the_dependents_without_their_reference():
    client = plane()
    owner = _owner(client)
    _dependent(client, owner, "a")
    async with running(GarbageCollector(client)):
        client.delete("ConfigMap", "default", "owner", propagation="Orphan")
        await until(client, "ConfigMap", "default", "owner", gone)
        kept = client.get("Secret", "default", "a")
        assert kept is not None and "ownerReferences" not in kept["metadata"]


async def test_foreground_shows_the_owner_until_blocking_dependents_are_gone():
    client = plane()
    owner = _owner(client)
    _dependent(client, owner, "held", finalizers=["example.com/hold"])  # goes only when released
    _dependent(client, owner, "free", block=False)
    async with running(GarbageCollector(client)):
        client.delete("ConfigMap", "default", "owner", propagation="Foreground")
        await until(client, "Secret", "default", "free", gone)
        held = await until(client, "Secret", "default", "held", lambda o: o["metadata"].get("deletionTimestamp"))
        owner_now = client.get("ConfigMap", "default", "owner")
        assert owner_now["metadata"]["finalizers"] == [FOREGROUND_FINALIZER]
        assert owner_now["metadata"]["deletionTimestamp"]
        held["metadata"]["finalizers"] = []
        client.update("Secret", held)
        await until(client, "ConfigMap", "default", "owner", gone)


async def test_a_dependent_left_by_an_owner_gone_meanwhile_is_collected_at_start():
    client = plane()
    owner = _owner(client)
    _dependent(client, owner, "stray")
    client.delete("ConfigMap", "default", "owner")  # no collector runs
    assert client.get("Secret", "default", "stray") is not None
    async with running(GarbageCollector(client)):
        await until(client, "Secret", "default", "stray", gone)
