"""What a test breaks in the API server's streams (apiserver/faults.py) and the store's compaction,
on the wire: a dropped watch ends without its final chunk, a bookmark asked for comes at once with
the store's version, and a watch from a compacted version is 410 Gone as the watch cache answers it
(storage/cacher/cacher.go Watch: one ERROR event, newErrWatcher), or as the answer's status.
The kube backend's tests (tests/kube) drive the same faults through the real client."""

from __future__ import annotations

import json

import aiohttp
import pytest

from tests.apiserver.conftest import TOKEN

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def add(api, name: str) -> None:
    api.server.objects.create(api.server.kinds.named("ConfigMap"), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}})


async def next_event(response) -> dict:
    return json.loads(await response.content.readline())


async def test_a_dropped_watch_ends_mid_stream(api):
    since = api.store.rv
    async with api.client.get(f"{CONFIGMAPS}?watch=1&resourceVersion={since}", headers=AUTH) as response:
        add(api, "before")
        assert (await next_event(response))["object"]["metadata"]["name"] == "before"
        assert api.server.faults.watching() == {"ConfigMap": 1}
        api.server.faults.drop_streams()
        assert api.server.faults.watching() == {}
        with pytest.raises(aiohttp.ClientPayloadError):  # no final chunk: the connection broke
            await response.content.read()


async def test_a_bookmark_asked_for_comes_at_once_with_the_current_version(api):
    async with api.client.get(f"{CONFIGMAPS}?watch=1&allowWatchBookmarks=true&resourceVersion={api.store.rv}",
                              headers=AUTH) as response:
        add(api, "unseen")
        assert (await next_event(response))["type"] == "ADDED"
        api.server.faults.bookmark()
        bookmark = await next_event(response)
        assert bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["metadata"]["resourceVersion"] == str(api.store.rv)
        assert api.server.faults.bookmarks_sent == 1


async def test_a_watch_from_before_the_compaction_is_gone(api):
    before = api.store.rv
    add(api, "a")
    add(api, "b")
    api.store.compact(api.store.rv)
    assert not api.store.history
    code, error, _ = await api.call("GET", f"{CONFIGMAPS}?watch=1&resourceVersion={before}")
    assert code == 200 and error["type"] == "ERROR", error
    assert error["object"]["code"] == 410 and error["object"]["reason"] == "Expired"

    api.server.faults.gone_as_http_status = True
    code, status, _ = await api.call("GET", f"{CONFIGMAPS}?watch=1&resourceVersion={before}")
    assert code == 410 and status["reason"] == "Expired", status
