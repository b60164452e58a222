"""Bad input answers a 4xx Status, never 500 (issue #32 item 9): a body nested deeper than the
server follows, query parameters that do not parse as the parameter codec parses them
(strconv.ParseBool / ParseInt: apimachinery's runtime/conversion queryparams), options the
validation refuses (meta/v1/validation ValidatePatchOptions, ValidateDeleteOptions,
internalversion/validation ValidateListOptions), and a JSON patch over maxJSONPatchOperations
(staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go)."""

from __future__ import annotations

import json

import pytest

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
CM = {"apiVersion": "v1", "kind": "ConfigMap"}


def _nested(depth: int) -> str:
    return '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"data":{"a":' + \
        "[" * depth + "]" * depth + "}}"


@pytest.mark.parametrize("depth", [5000, 150])
async def test_a_body_nested_too_deep_is_400(api, depth):
    code, body, _ = await api.call("POST", CONFIGMAPS, raw=_nested(depth).encode())
    assert code == 400 and body["reason"] == "BadRequest", body
    assert "nests deeper" in body["message"]
    code, body, _ = await api.call("POST", CONFIGMAPS, raw=_nested(depth).encode(),
                                   content_type="application/yaml")
    assert code == 400, body


async def test_a_body_within_the_depth_is_stored(api):
    code, body, _ = await api.call("POST", CONFIGMAPS, {**CM, "metadata": {"name": "fine"}, "data": {"a": "b"}})
    assert code == 201, body


@pytest.mark.parametrize("query, message", [
    ("watch=1&timeoutSeconds=abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
    ("watch=maybe", 'strconv.ParseBool: parsing "maybe": invalid syntax'),
    ("limit=ten", 'strconv.ParseInt: parsing "ten": invalid syntax'),
    ("limit=99999999999999999999", "value out of range"),
])
async def test_query_parameters_that_do_not_parse_are_400(api, query, message):
    code, body, _ = await api.call("GET", f"{CONFIGMAPS}?{query}")
    assert (code, body["reason"]) == (400, "BadRequest"), body
    assert message in body["message"]


@pytest.mark.parametrize("query, field", [
    ("resourceVersionMatch=Exact", "resourceVersionMatch"),
    ("resourceVersion=1&resourceVersionMatch=Sometimes", "resourceVersionMatch"),
    ("sendInitialEvents=true", "sendInitialEvents"),
    ("watch=1&resourceVersionMatch=NotOlderThan", "resourceVersionMatch"),
    ("watch=1&sendInitialEvents=true", "resourceVersionMatch"),
    ("watch=1&sendInitialEvents=true&resourceVersionMatch=Exact", "resourceVersionMatch"),
])
async def test_list_options_the_validation_refuses_are_422(api, query, field):
    """internalversion/validation ValidateListOptions and validateWatchOptions (WatchList on)."""
    code, body, _ = await api.call("GET", f"{CONFIGMAPS}?{query}")
    assert code == 422 and body["details"]["kind"] == "ListOptions", body
    assert body["details"]["causes"][0]["field"] == field


@pytest.mark.parametrize("query, field", [
    ("dryRun=Some", "dryRun"), ("fieldValidation=Loose", "fieldValidation"), ("force=true", "force"),
    ("fieldManager=" + "m" * 129, "fieldManager"),
])
async def test_patch_options_the_validation_refuses_are_422(api, query, field):
    await api.call("POST", CONFIGMAPS, {**CM, "metadata": {"name": "cm"}})
    code, body, _ = await api.call("PATCH", f"{CONFIGMAPS}/cm?{query}", {"data": {"a": "b"}},
                                   content_type="application/merge-patch+json")
    assert code == 422 and body["details"]["kind"] == "PatchOptions", body
    assert body["details"]["causes"][0]["field"] == field


@pytest.mark.parametrize("options", [{"gracePeriodSeconds": "soon"}, {"propagationPolicy": "Sideways"},
                                     {"preconditions": {"uid": 5}}, ["not", "an", "object"]])
async def test_delete_options_that_are_not_ones_are_4xx(api, options):
    await api.call("POST", CONFIGMAPS, {**CM, "metadata": {"name": "cm"}})
    code, body, _ = await api.call("DELETE", f"{CONFIGMAPS}/cm", options)
    assert code in (400, 422), body
    assert (await api.call("GET", f"{CONFIGMAPS}/cm"))[0] == 200  # nothing deleted


async def test_a_json_patch_over_the_operation_limit_is_413(api):
    await api.call("POST", CONFIGMAPS, {**CM, "metadata": {"name": "cm"}, "data": {"a": "1"}})
    ops = [{"op": "test", "path": "/data/a", "value": "1"}] * 10001
    code, body, _ = await api.call("PATCH", f"{CONFIGMAPS}/cm", json.dumps(ops),
                                   content_type="application/json-patch+json")
    assert (code, body["reason"]) == (413, "RequestEntityTooLarge"), body


async def test_a_watch_list_is_served(api):
    """A watch-list (client-go's WatchListClient): its initial events, then the bookmark that
    ends them."""
    await api.call("POST", CONFIGMAPS, {**CM, "metadata": {"name": "cm"}})
    code, events, _ = await api.call("GET", f"{CONFIGMAPS}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                                            "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
    assert code == 200, events
    assert [e["type"] for e in events][:2] == ["ADDED", "BOOKMARK"], events
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
