"""Validation as kube-apiserver's, in-process against the real registry (issue #44 item 6), each
check named by its upstream function in kubernetes pkg/apis/core/validation/validation.go:
ValidateResourceRequirements and ValidateNonnegativeQuantity (a pod's and a pod template's),
ValidateConfigMap and ValidateSecret (1 MiB, core.MaxSecretSize)."""

from __future__ import annotations

import base64

import pytest

from backend.local.registry.status import ApiError
from tests.controlplane import plane


def _pod(name: str, resources: dict) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [
        {"name": "main", "image": "x", "command": ["true"], "resources": resources}]}}


@pytest.mark.parametrize("resources, message", [
    ({"requests": {"cpu": "-50"}},
     'spec.containers[0].resources.requests[cpu]: Invalid value: "-50": must be greater than or equal to 0'),
    ({"limits": {"memory": "-1Gi"}},
     'spec.containers[0].resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0'),
    ({"requests": {"cpu": "4"}, "limits": {"cpu": "2"}},
     'spec.containers[0].resources.requests: Invalid value: "4": must be less than or equal to cpu limit of 2'),
])
def test_a_pod_asking_a_negative_amount_or_more_than_its_limit_is_refused(resources, message):
    client = plane()
    with pytest.raises(ApiError) as refused:
        client.create("Pod", _pod("p", resources))
    assert refused.value.code == 422 and message in refused.value.message
    assert client.get("Pod", "default", "p") is None


def test_a_job_whose_pod_template_asks_a_negative_amount_is_refused():
    """ValidateJob validates its template as ValidatePodTemplateSpec, resources included."""
    client = plane()
    with pytest.raises(ApiError) as refused:
        client.create("Job", {"metadata": {"name": "j", "namespace": "default"}, "spec": {"template": {
            "spec": {"restartPolicy": "Never", **_pod("p", {"requests": {"cpu": "-1"}})["spec"]}}}})
    assert refused.value.code == 422
    assert "spec.template.spec.containers[0].resources.requests[cpu]" in refused.value.message


def test_configmaps_and_secrets_hold_at_most_a_mebibyte():
    """ValidateConfigMap sums data's values and binaryData's (field.TooLong on the whole object,
    written `[]`); ValidateSecret sums data's decoded values (on `data`). At the limit is fine."""
    client = plane()
    limit = 1024 * 1024
    client.create("ConfigMap", {"metadata": {"name": "full", "namespace": "default"},
                                "data": {"a": "x" * (limit - 1)}, "binaryData": {"b": base64.b64encode(b"y").decode()}})
    with pytest.raises(ApiError) as refused:
        client.create("ConfigMap", {"metadata": {"name": "over", "namespace": "default"},
                                    "data": {"a": "x" * limit, "b": "y"}})
    assert (refused.value.code, refused.value.message) == \
        (422, 'ConfigMap "over" is invalid: []: Too long: may not be more than 1048576 bytes')
    with pytest.raises(ApiError) as grown:
        full = client.get("ConfigMap", "default", "full")
        client.update("ConfigMap", {**full, "data": {"a": "x" * limit}, "binaryData": full["binaryData"]})
    assert grown.value.code == 422
    with pytest.raises(ApiError) as secret:
        client.create("Secret", {"metadata": {"name": "s", "namespace": "default"},
                                 "stringData": {"a": "x" * (limit + 1)}})
    assert (secret.value.code, secret.value.message) == \
        (422, 'Secret "s" is invalid: data: Too long: may not be more than 1048576 bytes')
