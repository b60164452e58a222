"""Lists in pages and reads from a version not reached yet (issue #32 item 10), as kube-apiserver
serves them: `limit`/`continue` as storage/etcd3/store.go GetList and storage/continue.go (pages
of one consistent list at the first page's resourceVersion, remainingItemCount unless a selector
filters, a token whose revision is compacted 410 Expired with a token to go on inconsistently),
and a list or watch from a future resourceVersion as the watch cache (storage/cacher
watch_cache.go waitUntilFreshAndBlock, cacher.go newErrWatcher): it waits for the version, then
504 "Too large resource version" (for a watch, its one ERROR event)."""

from __future__ import annotations

import asyncio
import base64
import json

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
CM = {"apiVersion": "v1", "kind": "ConfigMap"}


async def _fill(api, count: int, start: int = 0) -> None:
    for i in range(start, count):
        code, body, _ = await api.call("POST", CONFIGMAPS, {**CM, "metadata": {"name": f"cm-{i:02d}"}})
        assert code == 201, body


async def test_pages_add_up_to_one_list_at_the_first_pages_version(api):
    await _fill(api, 5)
    code, first, _ = await api.call("GET", f"{CONFIGMAPS}?limit=2")
    assert code == 200 and [o["metadata"]["name"] for o in first["items"]] == ["cm-00", "cm-01"], first
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert decoded == {"v": "meta.k8s.io/v1", "rv": int(first["metadata"]["resourceVersion"]), "start": "cm-01\x00"}

    await api.call("DELETE", f"{CONFIGMAPS}/cm-03")  # after the first page: the pages still show it
    await _fill(api, 6, start=5)  # cm-05 is new: not in the list the pages read
    names = []
    while token:
        code, page, _ = await api.call("GET", f"{CONFIGMAPS}?limit=2&continue={token}")
        assert code == 200 and page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"], page
        names += [o["metadata"]["name"] for o in page["items"]]
        token = page["metadata"].get("continue")
    assert names == ["cm-02", "cm-03", "cm-04"]


async def test_a_filtered_page_has_no_remaining_count(api):
    await _fill(api, 4)
    code, page, _ = await api.call("GET", f"{CONFIGMAPS}?limit=1&fieldSelector=metadata.name!=cm-00")
    assert code == 200 and [o["metadata"]["name"] for o in page["items"]] == ["cm-01"], page
    assert page["metadata"]["continue"] and "remainingItemCount" not in page["metadata"]


async def test_a_token_past_its_revision_is_410_with_one_to_go_on(api):
    await _fill(api, 3)
    code, first, _ = await api.call("GET", f"{CONFIGMAPS}?limit=1")
    api.server.pager._kept.clear()  # as etcd's compaction drops the revision
    code, body, _ = await api.call("GET", f"{CONFIGMAPS}?limit=1&continue={first['metadata']['continue']}")
    assert (code, body["reason"]) == (410, "Expired") and "inconsistent list" in body["message"], body
    code, page, _ = await api.call("GET", f"{CONFIGMAPS}?limit=5&continue={body['metadata']['continue']}")
    assert code == 200 and [o["metadata"]["name"] for o in page["items"]] == ["cm-01", "cm-02"], page


async def test_a_token_that_is_none_is_400(api):
    code, body, _ = await api.call("GET", f"{CONFIGMAPS}?limit=1&continue=bm90LWpzb24")
    assert (code, body["reason"]) == (400, "BadRequest"), body
    code, body, _ = await api.call("GET", f"{CONFIGMAPS}?limit=1&continue=x&resourceVersion=5")
    assert code == 400 and "specifying resource version is not allowed when using continue" in body["message"]


async def test_a_list_from_a_future_version_waits_for_it(api):
    wanted = api.store.rv + 1
    listing = asyncio.ensure_future(api.call("GET", f"{CONFIGMAPS}?resourceVersion={wanted}"))
    await asyncio.sleep(0.05)
    assert not listing.done()
    await _fill(api, 1)
    code, body, _ = await listing
    assert code == 200 and int(body["metadata"]["resourceVersion"]) >= wanted, body
    code, body, _ = await api.call("GET", f"{CONFIGMAPS}?resourceVersion={wanted + 1000}")
    assert (code, body["reason"]) == (504, "Timeout"), body
    assert body["message"] == f"Timeout: Too large resource version: {wanted + 1000}, current: {api.store.rv}"
    assert body["details"]["retryAfterSeconds"] == 1


async def test_a_watch_from_a_far_future_version_ends_with_one_error_event(api):
    far = api.store.rv + 1000
    code, events, _ = await api.call("GET", f"{CONFIGMAPS}?watch=1&resourceVersion={far}")
    assert code == 200, events
    events = events if isinstance(events, list) else [events]
    assert [e["type"] for e in events] == ["ERROR"], events
    assert events[0]["object"]["code"] == 504 and "Too large resource version" in events[0]["object"]["message"]


async def test_a_resource_version_that_is_no_number_is_422(api):
    code, body, _ = await api.call("GET", f"{CONFIGMAPS}?resourceVersion=abc")
    assert code == 422 and body["details"]["causes"][0]["field"] == "resourceVersion", body
