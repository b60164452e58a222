"""The API store as an API server's watch cache: one resourceVersion counter for all kinds,
replay after a version, 410 Gone once a version is older than the kept history (as
kube-apiserver's watch cache answers "too old resource version"), no version for a write that
changes nothing, and versions that keep increasing across restarts."""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path

import pytest

from backend.local.registry import store as store_module
from tests.tmpfs import mounted_tmpfs
from backend.local.registry.kinds import Kinds
from backend.local.registry.status import ApiError
from backend.local.registry.store import Store
from training.atomic import write_atomic


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


class _FullDisk:
    """write_atomic on a disk with no space left: the write fails as os.write does (ENOSPC)."""

    def __init__(self) -> None:
        self.full = True

    def __call__(self, path, data, durable=True, mode=None) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        write_atomic(path, data, durable=durable, mode=mode)


def test_a_write_the_disk_refuses_is_never_seen_and_is_said_once(registry, tmp_path, monkeypatch, caplog):
    """etcd commits a write or refuses it (mvcc.ErrNoSpace, "etcdserver: mvcc: database space
    exceeded"), and kube-apiserver relays a storage error as a 500 Status with its message
    (responsewriters/status.go ErrorToAPIStatus: StatusReasonUnknown, err.Error()): a refused
    object is not listed, not watched, not informed, and absent after a restart."""
    cm = registry.by_kind("v1", "ConfigMap")
    store = Store(registry, tmp_path)
    kept = store.create(cm, _cm("kept"))
    watch, _ = store.watch(cm, None, lambda o: True, kept["metadata"]["resourceVersion"])
    informed: list = []
    store.listeners.append(lambda _kind, event: informed.append(event))
    disk = _FullDisk()
    monkeypatch.setattr(store_module, "write_atomic", disk)

    for write in (lambda: store.create(cm, _cm("refused")),
                  lambda: store.update(cm, {**kept, "data": {"a": "2"}}),
                  lambda: store.create(cm, _cm("refused-too"))):
        with pytest.raises(ApiError) as refused:
            write()
        assert (refused.value.code, refused.value.reason, refused.value.message) == (500, "", store_module.DISK_FULL)
        assert str(tmp_path) not in refused.value.message
    assert [o["metadata"]["name"] for o in store.list(cm)] == ["kept"]
    assert store.get(cm, "default", "kept") == kept
    assert watch.queue.empty() and informed == []
    said = [r.getMessage() for r in caplog.records if "disk is full" in r.getMessage()]
    assert said == ["the state disk is full: writes are refused until space is freed"]

    disk.full = False
    store.create(cm, _cm("after"))
    assert [e.object["metadata"]["name"] for e in informed] == ["after"]
    restarted = Store(registry, tmp_path)
    restarted.load()
    assert sorted(o["metadata"]["name"] for o in restarted.list(cm)) == ["after", "kept"]
    assert restarted.get(cm, "default", "kept")["data"] == {"a": "1"}


def test_a_delete_the_disk_refuses_leaves_the_object(registry, tmp_path, monkeypatch):
    cm = registry.by_kind("v1", "ConfigMap")
    store = Store(registry, tmp_path)
    store.create(cm, _cm("kept"))

    def unlink(self, missing_ok=False):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(ApiError) as refused:
        store.delete(cm, "default", "kept")
    assert refused.value.code == 500 and "Read-only file system" in refused.value.message
    assert str(tmp_path) not in refused.value.message
    assert store.find(cm, "default", "kept") is not None


def test_names_of_any_valid_length_are_stored(registry, tmp_path):
    """Names go up to 253 characters (apimachinery's DNS1123SubdomainMaxLength), more than a file
    name holds once the store's suffixes are added: a long name is stored under a hashed one."""
    cm = registry.by_kind("v1", "ConfigMap")
    store = Store(registry, tmp_path)
    long_names = ["a" * 253, "a" * 252 + "b", ("x." * 126) + "y"]
    for name in long_names:
        store.create(cm, _cm(name))
    restarted = Store(registry, tmp_path)
    restarted.load()
    assert sorted(o["metadata"]["name"] for o in restarted.list(cm)) == sorted(long_names)
    restarted.delete(cm, "default", long_names[0])
    again = Store(registry, tmp_path)
    again.load()
    assert sorted(o["metadata"]["name"] for o in again.list(cm)) == sorted(long_names[1:])


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs."""
    with mounted_tmpfs(tmp_path / "state", "1m") as mount:
        yield mount


def test_a_full_tmpfs_refuses_the_write_and_keeps_nothing_of_it(registry, small_tmpfs):
    cm = registry.by_kind("v1", "ConfigMap")
    store = Store(registry, small_tmpfs)
    store.create(cm, _cm("kept"))
    (small_tmpfs / "filler").write_bytes(b"\0" * (1024 * 1024 - 64 * 1024))  # leaves less than one page free
    with pytest.raises(ApiError) as refused:
        store.create(cm, _cm("big", "x" * 200_000))
    assert refused.value.message == store_module.DISK_FULL
    assert store.find(cm, "default", "big") is None
    (small_tmpfs / "filler").unlink()
    restarted = Store(registry, small_tmpfs)
    restarted.load()
    assert [o["metadata"]["name"] for o in restarted.list(cm)] == ["kept"]
    assert not list(small_tmpfs.glob("**/.big.json.tmp-*"))  # the failed write left no temporary file
