"""Selectors, patches, printer columns and protobuf bodies, against the upstream rules they follow
(k8s.io/apimachinery labels and fields, RFC 7386 / RFC 6902, strategic merge by patchMergeKey,
duration.HumanDuration, runtime.Unknown protobuf envelopes)."""

from __future__ import annotations

import pytest

from backend.local.apiserver import patch, protobuf, tables
from backend.local.registry import merge
from backend.local.apiserver.selectors import field_matcher, label_matcher
from backend.local.registry.status import ApiError


def _labelled(**labels) -> dict:
    return {"metadata": {"name": "x", "labels": labels}, "status": {"phase": "Running"}}


@pytest.mark.parametrize("selector, labels, expected", [
    ("a=b", {"a": "b"}, True), ("a==b", {"a": "c"}, False), ("a!=b", {}, True),
    ("a in (b, c)", {"a": "c"}, True), ("a notin (b,c)", {"a": "c"}, False),
    ("a", {"a": ""}, True), ("!a", {"a": "x"}, False), ("a=b,c in (d)", {"a": "b", "c": "d"}, True),
    ("jobset.sigs.k8s.io/jobset-name=lesson-ddp", {"jobset.sigs.k8s.io/jobset-name": "lesson-ddp"}, True),
    # selector.go GreaterThan/LessThan: both sides integers; an absent or non-integer label never matches
    ("idx>20", {"idx": "21"}, True), ("idx>20", {"idx": "20"}, False), ("idx<20", {"idx": "3"}, True),
    ("idx>20", {}, False), ("idx>20", {"idx": "many"}, False), ("idx>0,a=b", {"idx": "1", "a": "b"}, True),
])
def test_label_selectors(selector, labels, expected):
    assert label_matcher(selector)(_labelled(**labels)) is expected


@pytest.mark.parametrize("selector", ["a in (b", "-a=b", "a=b c", "idx>x", "idx<1.5", "idx>-1"])
def test_bad_label_selectors_are_400(selector):
    with pytest.raises(ApiError) as raised:
        label_matcher(selector)
    assert raised.value.code == 400


def test_field_selectors_only_on_supported_fields():
    assert field_matcher("status.phase=Running,metadata.name!=y", "Pod")(_labelled())
    with pytest.raises(ApiError, match="field label not supported: status.phase"):
        field_matcher("status.phase=Running", "ConfigMap")


def test_patches():
    live = {"spec": {"containers": [{"name": "node", "image": "a", "env": [{"name": "X", "value": "1"}]}],
                     "keep": 1}}
    merged = merge.merge_patch(live, {"spec": {"keep": None, "new": 2}})
    assert merged == {"spec": {"containers": live["spec"]["containers"], "new": 2}}
    strategic = merge.strategic_merge(live, {"spec": {"containers": [{"name": "node", "env": [
        {"name": "Y", "value": "2"}]}, {"name": "side", "image": "b"}]}})
    assert strategic["spec"]["containers"] == [
        {"name": "node", "image": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
        {"name": "side", "image": "b"}]
    deleted = merge.strategic_merge(strategic, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}})
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["node"]
    ops = [{"op": "replace", "path": "/spec/keep", "value": 5}, {"op": "add", "path": "/spec/containers/-",
                                                                 "value": {"name": "z"}},
           {"op": "test", "path": "/spec/keep", "value": 5}, {"op": "remove", "path": "/spec/containers/0"}]
    assert patch.json_patch(live, ops) == {"spec": {"containers": [{"name": "z"}], "keep": 5}}
    with pytest.raises(ApiError):
        patch.json_patch(live, [{"op": "test", "path": "/spec/keep", "value": 2}])


@pytest.mark.parametrize("seconds, shown", [(5, "5s"), (119, "119s"), (150, "2m30s"), (600, "10m"),
                                            (3 * 3600 + 120, "3h2m"), (30 * 3600, "30h"), (50 * 3600, "2d2h"),
                                            (10 * 86400, "10d")])
def test_ages_as_kubectl_shows_them(seconds, shown):
    assert tables.human_duration(seconds) == shown


def test_printer_column_json_paths():
    job = {"status": {"conditions": [{"type": "Created"}, {"type": "Complete", "status": "True"}]}}
    assert tables.json_path(job, ".status.conditions[-1:].type") == "Complete"
    assert tables.json_path(job, '.status.conditions[?(@.type=="Complete")].status') == "True"
    assert tables.json_path(job, ".status.missing") is None


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_protobuf_configmap_from_kubectl_create():
    meta = _field(1, b"settings") + _field(3, b"team")
    entry = _field(1, b"lr") + _field(2, b"0.01")
    raw = _field(1, meta) + _field(2, entry)
    unknown = _field(1, _field(1, b"v1") + _field(2, b"ConfigMap")) + _field(2, raw)
    assert protobuf.decode(b"k8s\x00" + unknown) == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "team"},
        "data": {"lr": "0.01"}}
    other = _field(1, _field(1, b"apps/v1") + _field(2, b"Deployment")) + _field(2, b"")
    with pytest.raises(ApiError) as raised:
        protobuf.decode(b"k8s\x00" + other)
    assert raised.value.code == 415
