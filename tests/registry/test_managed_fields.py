"""managedFields on the registry's writes, as kube-apiserver's field manager keeps them
(k8s.io/apimachinery pkg/util/managedfields/internal: fieldmanager.go, structuredmerge.go,
managedfieldsupdater.go, capmanagers.go): an Update entry per manager, apiVersion and
subresource; a field one writer changes leaves every other entry; an entry left without fields
goes; entries a write does not touch stay as stored; past 10 updaters the oldest merge into
"ancient-changes"."""

from __future__ import annotations

from tests.controlplane import plane


def _entries(obj: dict) -> dict[tuple[str, str], dict]:
    return {(e["manager"], e.get("subresource", "")): e for e in obj["metadata"]["managedFields"]}


def _pod() -> dict:
    return {"metadata": {"name": "p", "namespace": "default", "labels": {"team": "a"}},
            "spec": {"containers": [{"name": "c", "image": "x", "command": ["true"]}]}}


def test_each_writer_owns_what_it_changed_and_others_stay_as_stored():
    client = plane()
    created = client.create("Pod", _pod())
    [creator] = created["metadata"]["managedFields"]
    assert (creator["manager"], creator["operation"]) == ("kfcockpit-controller", "Update")
    assert "f:status" not in creator["fieldsV1"] and 'k:{"name":"c"}' in creator["fieldsV1"]["f:spec"]["f:containers"]

    pods = client._kind("Pod")
    relabelled = {**created, "metadata": {**created["metadata"], "labels": {"team": "b"}}}
    alice = client.registry.update(pods, relabelled, manager="alice")[0]
    entries = _entries(alice)
    assert entries[("alice", "")]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:team": {}}}}
    # the creator keeps the labels map itself (its "." member), no longer its key
    assert entries[("kfcockpit-controller", "")]["fieldsV1"]["f:metadata"] == {"f:labels": {}}

    running = client.update_status("Pod", {**client.get("Pod", "default", "p"), "status": {"phase": "Running"}})
    after = _entries(running)
    assert after[("kfcockpit-controller", "status")]["fieldsV1"] == {"f:status": {"f:phase": {}}}
    assert after[("alice", "")] == entries[("alice", "")]  # untouched by a status write
    assert after[("kfcockpit-controller", "")] == entries[("kfcockpit-controller", "")]

    relabelled = {**running, "metadata": {**running["metadata"], "labels": {"team": "c"}}}
    bob = client.registry.update(pods, relabelled, manager="bob")[0]
    assert ("alice", "") not in _entries(bob)  # its only field taken: the entry goes


def test_past_ten_updaters_the_oldest_merge():
    client = plane()
    cm = client.create("ConfigMap", {"metadata": {"name": "cm", "namespace": "default"}, "data": {}})
    kind = client._kind("ConfigMap")
    for i in range(12):
        cm = {**cm, "data": {**cm["data"], f"k{i}": "v"}}
        cm = client.registry.update(kind, cm, manager=f"m{i:02d}")[0]
    managers = [e["manager"] for e in cm["metadata"]["managedFields"]]
    assert len(managers) == 10 and "ancient-changes" in managers, managers
    assert "m11" in managers and "m00" not in managers
