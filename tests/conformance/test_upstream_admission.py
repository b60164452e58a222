"""Upstream admission end to end, through real kubectl on the embedded cluster: what a cluster
with Trainer v2.3.0, JobSet v0.12.0 and KubeRay v1.7.0 refuses is refused with the Status it
would send, and what it admits is admitted (the rules themselves are tested one by one in
tests/registry/crds). A handful, on the suite's one cluster."""

from __future__ import annotations

import json

import yaml

from tests.conformance.conftest import REPO


def _runtime(name: str, **template_spec) -> str:
    runtime = yaml.safe_load((REPO / "manifests" / "runtime.yaml").read_text())
    runtime["metadata"]["name"] = name
    runtime["spec"]["template"]["spec"].update(template_spec)
    return yaml.safe_dump(runtime)


def test_crd_schema_and_cel_rules_through_kubectl(kubectl):
    # a dotted runtime name is a valid RFC 1123 subdomain (the embedded cluster used to refuse it)
    assert kubectl("apply", "-f", "-", input=_runtime("ua.torch")) == \
        "trainingruntime.trainer.kubeflow.org/ua.torch created\n"
    # the JobSet CRD's enum (jobset v0.12.0 SuccessPolicy.Operator: All, Any)
    err = kubectl.fails("apply", "-f", "-", input=_runtime("ua-enum", successPolicy={"operator": "Most"}))
    assert 'The TrainingRuntime "ua-enum" is invalid: \n* spec.template.spec.successPolicy.operator: Unsupported ' \
           'value: "Most": supported values: "All", "Any"' in err
    # a CEL transition rule: the failure policy is immutable (x-kubernetes-validations self == oldSelf)
    err = kubectl.fails("patch", "trainingruntime", "ua.torch", "--type=merge",
                        "-p", '{"spec":{"template":{"spec":{"failurePolicy":{"maxRestarts":9}}}}}')
    assert 'The TrainingRuntime "ua.torch" is invalid: spec.template.spec.failurePolicy: Invalid value: Value is ' \
           "immutable" in err
    kubectl("delete", "trainingruntime", "ua.torch")


def test_trainer_webhook_and_immutable_trainjob_through_kubectl(kubectl):
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "ua-job"},
           "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "Runtime"}, "suspend": True,
                    "trainer": {"numNodes": 1, "command": ["true"]}}}
    err = kubectl.fails("apply", "-f", "-", input=yaml.safe_dump(job))
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: unsupported runtime: ' \
           "Runtime.trainer.kubeflow.org" in err
    job["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
    kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
    err = kubectl.fails("patch", "trainjob", "ua-job", "--type=merge", "-p", '{"spec":{"trainer":{"numNodes":2}}}')
    assert 'The TrainJob "ua-job" is invalid: spec.trainer: Invalid value: field is immutable' in err
    kubectl("delete", "trainjob", "ua-job")


def test_a_rayjob_kuberay_refuses_is_stored_and_fails_validation(kubectl):
    """KubeRay v1.7.0 has no webhook by default: validation.go's refusal becomes the RayJob's
    ValidationFailed status and an InvalidRayJobSpec event (rayjob_controller.go)."""
    job = yaml.safe_load((REPO / "manifests" / "rayjob.yaml").read_text())
    job["metadata"]["name"] = "ua-ray"
    job["spec"].update(suspend=True, shutdownAfterJobFinishes=False)
    assert kubectl("apply", "-f", "-", input=yaml.safe_dump(job)) == "rayjob.ray.io/ua-ray created\n"
    status = json.loads(kubectl("get", "rayjob", "ua-ray", "-o", "jsonpath={.status}"))
    message = ("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be "
               "suspended")
    # failed/succeeded: the CRD schema's defaults, which the API server applies to a status write
    # too (apiextensions-apiserver's structural defaulting of the whole object)
    assert status == {"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed", "message": message,
                      "failed": 0, "succeeded": 0}
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=ua-ray", "-o",
                     "jsonpath={.items[*].reason}")
    assert "InvalidRayJobSpec" in events.split()
    kubectl("delete", "rayjob", "ua-ray")


def test_explain_shows_upstream_field_documentation(kubectl):
    explained = kubectl("explain", "trainjob.spec.trainer.numProcPerNode").replace("\n    ", " ")
    assert "numProcPerNode is the number of processes/workers/slots on every training node." in explained
    explained = kubectl("explain", "jobset.spec.failurePolicy.maxRestarts").replace("\n    ", " ")
    assert "maxRestarts defines the limit on the number of JobSet restarts." in explained
    assert "FIELD: maxRestarts <integer>" in kubectl("explain", "jobset.spec.failurePolicy.maxRestarts")
