"""The API store as an API server's watch cache: one resourceVersion counter for all kinds,
replay after a version, 410 Gone once a version is older than the kept history (as
kube-apiserver's watch cache answers "too old resource version"), no version for a write that
changes nothing, and versions that keep increasing across restarts."""

from __future__ import annotations

import json
import time

import pytest

from backend.local.registry import store as store_module
from backend.local.registry.kinds import Kinds
from backend.local.registry.status import ApiError
from backend.local.registry.store import Store


def _cm(name: str, value: str = "1") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"a": value}}


@pytest.fixture
def registry() -> Kinds:
    return Kinds()


def test_versions_replay_and_gone(registry, monkeypatch):
    monkeypatch.setattr(store_module, "HISTORY", 4)
    store = Store(registry)
    cm = registry.by_kind("v1", "ConfigMap")
    start = store.rv
    first = store.create(cm, _cm("a"))
    assert int(first["metadata"]["resourceVersion"]) == start + 1 and first["metadata"]["uid"]
    unchanged = store.update(cm, _cm("a") | {"metadata": dict(first["metadata"])})
    assert unchanged is first  # nothing changed: no new version
    second = store.update(cm, {**first, "data": {"a": "2"}})
    assert int(second["metadata"]["resourceVersion"]) == start + 2

    _, backlog = store.watch(cm, "default", lambda o: True, str(start))
    assert [(e.type, e.object["data"]["a"]) for e in backlog] == [("ADDED", "1"), ("MODIFIED", "2")]
    with pytest.raises(ApiError) as conflict:
        store.update(cm, {**second, "data": {"a": "3"}}, expect_rv=first["metadata"]["resourceVersion"])
    assert conflict.value.code == 409

    for i in range(6):  # more events than the history keeps
        store.create(cm, _cm(f"x{i}"))
    with pytest.raises(ApiError) as gone:
        store.watch(cm, "default", lambda o: True, str(start))
    assert (gone.value.code, gone.value.reason) == (410, "Expired")
    watch, backlog = store.watch(cm, "default", lambda o: True, "0")  # "0": the current state
    assert sorted(e.object["metadata"]["name"] for e in backlog) == ["a", "x0", "x1", "x2", "x3", "x4", "x5"]
    store.delete(cm, "default", "a")
    assert watch.queue.get_nowait().type == "DELETED"


def test_stored_objects_survive_a_restart_with_higher_versions(registry, tmp_path):
    cm = registry.by_kind("v1", "ConfigMap")
    event = registry.by_kind("v1", "Event")
    before = Store(registry, tmp_path)
    created = before.create(cm, _cm("kept"))
    last = before.create(event, {"metadata": {"name": "e", "namespace": "default"}})
    old_version = created["metadata"]["resourceVersion"]

    after = Store(registry, tmp_path)
    after.load()
    assert after.get(cm, "default", "kept") == created
    assert after.find(event, "default", "e") is None  # events are this run's, not stored
    # above every version the earlier store handed out, the unstored event's included
    assert int(after.create(cm, _cm("new"))["metadata"]["resourceVersion"]) > int(last["metadata"]["resourceVersion"])
    for version in (old_version, last["metadata"]["resourceVersion"]):
        with pytest.raises(ApiError) as gone:  # an earlier controller's version cannot be resumed
            after.watch(cm, None, lambda o: True, version)
        assert gone.value.code == 410


def test_versions_never_repeat_across_a_restart_whatever_the_clock_says(registry, tmp_path, monkeypatch):
    cm = registry.by_kind("v1", "ConfigMap")
    clock = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    before = Store(registry, tmp_path)
    handed_out = [int(before.create(cm, _cm(f"c{i}"))["metadata"]["resourceVersion"]) for i in range(3)]
    clock[0] -= 3600  # the clock steps back an hour (NTP) before the restart
    after = Store(registry, tmp_path)
    after.load()
    assert int(after.create(cm, _cm("new"))["metadata"]["resourceVersion"]) > max(handed_out)


def test_a_state_root_from_before_the_persisted_counter_continues_above_its_versions(registry, tmp_path):
    """Versions were the wall clock in milliseconds at start: a root with no mark starts above
    both the clock and every stored version."""
    cm = registry.by_kind("v1", "ConfigMap")
    before = Store(registry, tmp_path)
    before.create(cm, _cm("kept"))
    stored = next(tmp_path.glob("core/configmaps/default/kept.json"))
    future = int(time.time() * 1000) + 10**9  # written by a clock ahead of this one
    stored.write_text(json.dumps(json.loads(stored.read_text()) | {"metadata": {
        "name": "kept", "namespace": "default", "resourceVersion": str(future)}}))
    (tmp_path / store_module.REVISION_FILE).unlink()

    after = Store(registry, tmp_path)
    after.load()
    assert int(after.create(cm, _cm("new"))["metadata"]["resourceVersion"]) > future
    with pytest.raises(ApiError) as gone:
        after.watch(cm, None, lambda o: True, str(future - 1))
    assert gone.value.code == 410
