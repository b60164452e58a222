"""What a client sees when the state disk refuses a write, and when the server fails: kube-apiserver
relays etcd's refusal as a 500 Status carrying its message (responsewriters/status.go
ErrorToAPIStatus; etcd's mvcc.ErrNoSpace "etcdserver: mvcc: database space exceeded") and the
object is nowhere; a failure of the server's own is a 500 InternalError Status
(apimachinery errors.NewInternalError), never aiohttp's plain-text page; a name of any valid
length (253, DNS1123SubdomainMaxLength) is stored, and no answer names the state directory."""

from __future__ import annotations

import errno

import pytest
from backend.local.registry import store as store_module
from tests.apiserver.conftest import served
from tests.controlplane import plane
from training.atomic import write_atomic

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def stored_api(tmp_path):
    """The API server over a registry kept on disk under tmp_path."""
    async with served(plane(tmp_path)) as api:
        yield api


def _cm(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}


async def test_a_create_on_a_full_disk_is_refused_and_nowhere(stored_api, tmp_path, monkeypatch):
    full = [True]

    def writer(path, data, durable=True, mode=None):
        if full[0]:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        write_atomic(path, data, durable=durable, mode=mode)

    code, listed, _ = await stored_api.call("GET", CONFIGMAPS)
    since = listed["metadata"]["resourceVersion"]
    monkeypatch.setattr(store_module, "write_atomic", writer)
    code, body, _ = await stored_api.call("POST", CONFIGMAPS, _cm("refused"))
    assert (code, body["kind"], body["status"], body["message"]) == (500, "Status", "Failure", store_module.DISK_FULL)
    assert str(tmp_path) not in body["message"]
    code, body, _ = await stored_api.call("GET", f"{CONFIGMAPS}/refused")
    assert code == 404
    code, listed, _ = await stored_api.call("GET", CONFIGMAPS)
    assert listed["items"] == []
    full[0] = False
    code, _, _ = await stored_api.call("POST", CONFIGMAPS, _cm("after"))
    assert code == 201
    code, events, _ = await stored_api.call("GET", f"{CONFIGMAPS}?watch=1&timeoutSeconds=1&resourceVersion={since}")
    events = [events] if isinstance(events, dict) else events  # one event parses as one document
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "after")]


async def test_a_name_of_any_valid_length_is_stored_and_no_answer_names_the_state_directory(stored_api, tmp_path):
    name = "a" * 250 + ".bc"
    code, body, _ = await stored_api.call("POST", CONFIGMAPS, _cm(name))
    assert code == 201, body
    code, body, _ = await stored_api.call("GET", f"{CONFIGMAPS}/{name}")
    assert (code, body["metadata"]["name"]) == (200, name)
    code, body, _ = await stored_api.call("POST", CONFIGMAPS, _cm("a" * 254))
    assert code == 422 and str(tmp_path) not in body["message"]


async def test_a_failure_of_the_server_itself_is_a_status(stored_api, monkeypatch):
    def broken(*_args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(stored_api.store, "get", broken)
    code, body, headers = await stored_api.call("GET", f"{CONFIGMAPS}/x")
    assert (code, body["kind"], body["reason"], body["message"]) == \
        (500, "Status", "InternalError", "Internal error occurred: RuntimeError: a bug")
    assert headers["Content-Type"].startswith("application/json")
