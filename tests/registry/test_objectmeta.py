"""Every write's metadata as kube-apiserver checks it (issue #32 item 10):
k8s.io/apimachinery pkg/api/validation/objectmeta.go ValidateObjectMeta / ValidateObjectMetaUpdate
(label values, name and namespace lengths, immutable name, namespace and uid) and
staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go Update (a custom resource
is replaced only at the resourceVersion its writer read: CRDs' AllowUnconditionalUpdate is
false; a uid in the object is a precondition)."""

from __future__ import annotations

import pytest

from backend.local.registry.status import ApiError
from tests.controlplane import plane


def _cm(name: str = "cm", **meta) -> dict:
    return {"metadata": {"name": name, "namespace": "default", **meta}, "data": {"a": "1"}}


def _refused(call) -> ApiError:
    with pytest.raises(ApiError) as raised:
        call()
    return raised.value


@pytest.mark.parametrize("meta, field, words", [
    ({"labels": {"team": "two words"}}, "metadata.labels", "a valid label must be an empty string"),
    ({"labels": {"team": "x" * 64}}, "metadata.labels", "must be no more than 63 characters"),
    ({"labels": {"bad key!": "x"}}, "metadata.labels", "name part must consist of"),
    ({"annotations": {"a": "x" * (256 * 1024)}}, "metadata.annotations", "Too long"),
    ({"finalizers": ["orphan", "foregroundDeletion"]}, "metadata.finalizers", "cannot be both set"),
    ({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}]},
     "metadata.ownerReferences.uid", "must not be empty"),
])
def test_metadata_refused_on_create(meta, field, words):
    error = _refused(lambda: plane().create("ConfigMap", _cm(**meta)))
    assert error.code == 422 and error.reason == "Invalid", error.message
    assert error.details["causes"][0]["field"] == field and words in error.message, error.message


def test_names_as_their_kind_takes_them():
    client = plane()
    error = _refused(lambda: client.create("Namespace", {"metadata": {"name": "n" * 64}}))
    assert error.code == 422 and "must be no more than 63 characters" in error.message
    error = _refused(lambda: client.create("ConfigMap", _cm("Upper")))
    assert error.code == 422 and "a lowercase RFC 1123 subdomain" in error.message
    client.create("ConfigMap", _cm("a." + "b" * 250))  # a subdomain: up to 253


def test_uid_is_a_precondition_of_a_put_and_immutable_in_a_patch():
    client = plane()
    stored = client.create("ConfigMap", _cm())
    changed = {**stored, "metadata": {**stored["metadata"], "uid": "0000-other"}}
    error = _refused(lambda: client.update("ConfigMap", changed))
    assert error.code == 409 and "Precondition failed: UID in precondition: 0000-other" in error.message
    error = _refused(lambda: client.registry.update(client._kind("ConfigMap"), changed, uid_precondition=False))
    assert error.code == 422 and "metadata.uid" in error.message and "field is immutable" in error.message


def test_a_custom_resource_is_replaced_only_at_the_version_read():
    client = plane()
    runtime = client.create("TrainingRuntime", {"metadata": {"name": "rt", "namespace": "default"},
                                                "spec": {"template": {"spec": {"replicatedJobs": []}}}})
    blind = {**runtime, "metadata": {k: v for k, v in runtime["metadata"].items() if k != "resourceVersion"}}
    error = _refused(lambda: client.update("TrainingRuntime", blind))
    assert error.code == 422 and "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update" \
        in error.message, error.message
    client.update("TrainingRuntime", runtime)  # with the version read: replaced
    plain = client.create("ConfigMap", _cm())
    plain["metadata"].pop("resourceVersion")
    client.update("ConfigMap", plain)  # a core kind allows an unconditional update
