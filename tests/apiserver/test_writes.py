"""What a write may change, as kube-apiserver's handlers decide it (issue #32 items 8 and 10):
a patch that would rename or move its object is refused as handlers/rest.go checkName refuses it
(400), one that changes the uid as objectmeta.go ValidateObjectMetaUpdate does (422 `field is
immutable`); a custom resource takes no strategic merge patch (apiextensions-apiserver
customresource_handler.go lists JSON patch, merge patch and apply: 415 for the rest), and a PUT
of one must name the resourceVersion it read (generic/registry/store.go Update, CRDs'
AllowUnconditionalUpdate false). Trainer v2.3.0's TrainJob schema types numProcPerNode as an
int32 (manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml): "auto" is its torch plugin's
value when the field is left out, not a value the API takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainingruntimes"
CM = {"apiVersion": "v1", "kind": "ConfigMap"}
MERGE, STRATEGIC, JSON_PATCH = ("application/merge-patch+json", "application/strategic-merge-patch+json",
                                "application/json-patch+json")


def _manifest(name: str) -> dict:
    return yaml.safe_load((MANIFESTS / name).read_text())


@pytest.fixture
async def trainjob(api):
    """The lesson's runtime and TrainJob, stored (its controller not running: nothing starts)."""
    code, body, _ = await api.call("POST", RUNTIMES, _manifest("runtime.yaml"))
    assert code == 201, body
    code, body, _ = await api.call("POST", TRAINJOBS, _manifest("trainjob.yaml"))
    assert code == 201, body
    return body


@pytest.mark.parametrize("op, code, words", [
    ({"op": "replace", "path": "/metadata/name", "value": "other"}, 400,
     "the name of the object (other) does not match the name on the URL (cm)"),
    ({"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}, 400,
     "the namespace of the provided object does not match the namespace sent on the request"),
    ({"op": "replace", "path": "/metadata/uid", "value": "0000-other"}, 422, "metadata.uid: Invalid value"),
])
async def test_a_patch_may_not_rename_move_or_reidentify(api, op, code, words):
    await api.call("POST", CONFIGMAPS, {**CM, "metadata": {"name": "cm"}})
    got, body, _ = await api.call("PATCH", f"{CONFIGMAPS}/cm", [op], content_type=JSON_PATCH)
    assert got == code and words in body["message"], body
    got, stored, _ = await api.call("GET", f"{CONFIGMAPS}/cm")
    assert got == 200 and stored["metadata"]["namespace"] == "default"


async def test_a_custom_resource_takes_no_strategic_merge_patch(api, trainjob):
    code, body, _ = await api.call("PATCH", f"{TRAINJOBS}/lesson-ddp", {"spec": {"suspend": True}},
                                   content_type=STRATEGIC)
    assert (code, body["reason"]) == (415, "UnsupportedMediaType"), body
    assert "application/strategic-merge-patch+json" not in body["message"]
    code, body, _ = await api.call("PATCH", f"{TRAINJOBS}/lesson-ddp", {"spec": {"suspend": True}},
                                   content_type=MERGE)
    assert code == 200 and body["spec"]["suspend"] is True, body
    code, _, _ = await api.call("PATCH", f"{CONFIGMAPS}/none", {"data": {}}, content_type=STRATEGIC)
    assert code == 404  # a core kind takes it (and has no such object)


async def test_replacing_a_custom_resource_needs_the_version_read(api, trainjob):
    blind = {**trainjob, "metadata": {k: v for k, v in trainjob["metadata"].items() if k != "resourceVersion"}}
    code, body, _ = await api.call("PUT", f"{TRAINJOBS}/lesson-ddp", blind)
    assert code == 422 and "must be specified for an update" in body["message"], body
    code, body, _ = await api.call("PUT", f"{TRAINJOBS}/lesson-ddp", trainjob)
    assert code == 200, body


async def test_num_proc_per_node_is_an_integer_as_trainer_v2_3_types_it(api):
    await api.call("POST", RUNTIMES, _manifest("runtime.yaml"))
    job = _manifest("trainjob.yaml")
    job["spec"]["trainer"]["numProcPerNode"] = "auto"
    code, body, _ = await api.call("POST", TRAINJOBS, job)
    assert code == 422, body
    assert 'spec.trainer.numProcPerNode: Invalid value: "string": spec.trainer.numProcPerNode in body must be of ' \
           'type integer: "string"' in body["message"]


async def test_unknown_fields_of_a_core_kind_are_warned_of_and_dropped(api):
    """handlers/rest.go fieldValidation Warn (the default): the warning as a quoted-string
    (apimachinery net.NewWarningHeader), the field gone as decoding into the Go type drops it."""
    code, body, headers = await api.call("POST", f"{CONFIGMAPS}?fieldValidation=Warn",
                                         {**CM, "metadata": {"name": "cm"}, "bogus": 1, "data": {"a": "b"}})
    assert code == 201 and "bogus" not in body, body
    assert headers.getall("Warning") == ['299 - "unknown field \\"bogus\\""']
    code, body, _ = await api.call("PATCH", f"{CONFIGMAPS}/cm", {"bogus": 2}, content_type=MERGE)
    assert code == 200 and "bogus" not in body and "f:bogus" not in json.dumps(body["metadata"]["managedFields"])


async def test_a_json_patch_adding_an_unknown_field_is_warned_of_and_dropped(api):
    await api.call("POST", CONFIGMAPS, {**CM, "metadata": {"name": "cm"}})
    code, body, headers = await api.call("PATCH", f"{CONFIGMAPS}/cm", [{"op": "add", "path": "/bogus", "value": 1}],
                                         content_type=JSON_PATCH)
    assert code == 200 and "bogus" not in body, body
    assert headers.getall("Warning") == ['299 - "unknown field \\"bogus\\""']
    code, body, _ = await api.call("PATCH", f"{CONFIGMAPS}/cm?fieldValidation=Strict",
                                   [{"op": "add", "path": "/bogus", "value": 1}], content_type=JSON_PATCH)
    assert code == 400 and 'strict decoding error: unknown field "bogus"' in body["message"], body


async def test_fields_given_twice_are_refused_with_strict_and_warned_of_otherwise(api):
    """The strict decoders (test/integration/apiserver/field_validation_test.go: `strict decoding
    error: duplicate field "metadata.name", ... duplicate field "spec.paused"`): with
    fieldValidation=Strict a body giving a field twice is 400; with Warn (the default) the last
    value is kept and the duplicate is a warning; with Ignore nothing is said."""
    body = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "twice"}, "data": {"a": "1", "a": "2"}}'
    code, status, _ = await api.call("POST", f"{CONFIGMAPS}?fieldValidation=Strict", raw=body)
    assert (code, status["message"]) == (400, 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                                              'strict decoding error: duplicate field "data.a"')
    code, stored, headers = await api.call("POST", CONFIGMAPS, raw=body)
    assert (code, stored["data"]) == (201, {"a": "2"})
    assert headers["Warning"] == '299 - "duplicate field \\"data.a\\""'
    code, _, headers = await api.call("PUT", f"{CONFIGMAPS}/twice?fieldValidation=Ignore", raw=body)
    assert code == 200 and "Warning" not in headers

    yaml_body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice-yaml\n  name: twice-yaml\n"
    code, status, _ = await api.call("POST", f"{CONFIGMAPS}?fieldValidation=Strict", raw=yaml_body.encode(),
                                     content_type="application/yaml")
    assert code == 400 and 'line 5: key "name" already set in map' in status["message"]
