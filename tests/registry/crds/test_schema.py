"""The structural schema as kube-apiserver applies it to a custom resource: pruning and
fieldValidation (apiextensions-apiserver v0.36 pkg/apiserver/schema/pruning/algorithm.go, the CR
handler's strict decoding), nulls and defaults (schema/defaulting), the OpenAPI checks with the
messages kube-openapi pkg/validation/errors/schema.go writes and
apiextensions-apiserver pkg/apiserver/validation/validation.go turns into field errors, the
list types (schema/listtype/validation.go) and ratcheting (CRDValidationRatcheting, GA)."""

from __future__ import annotations

import copy

import pytest

from backend.local.apiserver import validation
from backend.local.apiserver.schemas import CoreSchemas
from backend.local.registry import crds
from backend.local.registry.crds import structural
from backend.local.registry.kinds import Kinds
from backend.local.registry.status import ApiError
from tests.registry.crds.conftest import jobset, manifest, trainjob

UNCHECKED = ("<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
             "correct the existing errors to complete validation")
QUANTITY = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
            r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")


def _errors(cluster, obj) -> str:
    refused = cluster.refused(obj)
    assert refused.code == 422 and refused.reason == "Invalid"
    return refused.message.split(" is invalid: ", 1)[1]


def _trainer(**fields):
    return trainjob(trainer={"numNodes": 1, **fields})


@pytest.mark.parametrize("obj, errors", [
    (_trainer(numNodes="two"), ['spec.trainer.numNodes: Invalid value: "string": spec.trainer.numNodes in body must '
                                'be of type integer: "string"', UNCHECKED]),
    (_trainer(numNodes=2**31), ['<nil>: Invalid value: "": Checked value must be of type integer with format int32 in '
                                "spec.trainer.numNodes"]),
    (trainjob(activeDeadlineSeconds=0), ["spec.activeDeadlineSeconds: Invalid value: 0: spec.activeDeadlineSeconds in "
                                         "body should be greater than or equal to 1"]),
    (trainjob(runtimeRef={"kind": "ClusterTrainingRuntime"}), ["spec.runtimeRef.name: Required value", UNCHECKED]),
    (trainjob(runtimeRef={"name": ""}), ['spec.runtimeRef.name: Invalid value: "": spec.runtimeRef.name in body should '
                                         "be at least 1 chars long"]),
    (trainjob(runtimeRef={"name": "r" * 254}), ["spec.runtimeRef.name: Too long: may not be more than 253 bytes",
                                                UNCHECKED]),
    (_trainer(command=["x"] * 129), ["spec.trainer.command: Too many: 129: must have at most 128 items", UNCHECKED]),
    (_trainer(resourcesPerNode={"requests": {"cpu": "lots"}}),
     [f'spec.trainer.resourcesPerNode.requests.cpu: Invalid value: "lots": spec.trainer.resourcesPerNode.requests.cpu '
      f"in body should match '{QUANTITY}'"]),
    (_trainer(resourcesPerNode={"requests": {"cpu": 1.5}}),
     ['spec.trainer.resourcesPerNode.requests.cpu: Invalid value: "number": spec.trainer.resourcesPerNode.requests.cpu '
      'in body must be of type integer,string: "number"',
      '<nil>: Invalid value: "": "spec.trainer.resourcesPerNode.requests.cpu" must validate at least one schema '
      "(anyOf)",
      'spec.trainer.resourcesPerNode.requests.cpu: Invalid value: "number": spec.trainer.resourcesPerNode.requests.cpu '
      'in body must be of type integer: "number"', UNCHECKED]),
    (trainjob(runtimePatches=[{"manager": "a.io/b", "time": "yesterday"}]),
     ['spec.runtimePatches[0].time: Invalid value: "yesterday": spec.runtimePatches[0].time in body must be of type '
      'date-time: "yesterday"', UNCHECKED]),
    (_trainer(env=[{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]),
     ['spec.trainer.env[1]: Duplicate value: {"name":"A"}']),
])
def test_schema_errors_read_as_the_api_server_writes_them(cluster, obj, errors):
    text = _errors(cluster, obj)
    assert text == (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


def test_enum_and_set_duplicates(cluster):
    runtime = manifest("manifests/runtime.yaml")
    runtime["spec"]["template"]["spec"]["successPolicy"] = {"operator": "Most"}
    assert _errors(cluster, runtime) == ('[spec.template.spec.successPolicy.operator: Unsupported value: "Most": '
                                         f'supported values: "All", "Any", {UNCHECKED}]')
    runtime = manifest("manifests/runtime.yaml")
    runtime["spec"]["mlPolicy"]["torch"]["envInjection"] = {"targets": [{"jobName": "node",
                                                                         "containerNames": ["a", "a"]}]}
    assert _errors(cluster, runtime) == \
        'spec.mlPolicy.torch.envInjection.targets[0].containerNames[1]: Duplicate value: "a"'


def test_defaults_are_applied_top_down(cluster):
    job = trainjob()
    cluster.admit(job)
    assert job["spec"]["runtimeRef"] == {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                                         "kind": "ClusterTrainingRuntime"}
    assert job["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller" and job["spec"]["suspend"] is False
    runtime = manifest("manifests/runtime.yaml")
    cluster.admit(runtime)
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    assert node["replicas"] == 1 and node["groupName"] == "default"


def test_nulls_are_dropped_or_defaulted(cluster):
    job = trainjob(suspend=None)
    job["spec"]["trainer"]["image"] = None
    cluster.admit(job)
    assert job["spec"]["suspend"] is False and "image" not in job["spec"]["trainer"]


def test_status_is_not_set_on_create(cluster):
    job = trainjob()
    job["status"] = {"conditions": []}
    cluster.admit(job)
    assert "status" not in job


def test_pruning_lists_undeclared_fields_sorted_and_drops_them(cluster):
    job = _trainer(bogus=1)
    job["spec"]["zeta"] = {"a": 1}
    job["metadata"]["colour"] = "red"
    assert crds.unknown_fields("TrainJob", job) == ["metadata.colour", "spec.trainer.bogus", "spec.zeta"]
    cluster.admit(job)
    assert "zeta" not in job["spec"] and "bogus" not in job["spec"]["trainer"] and "colour" not in job["metadata"]
    assert crds.unknown_fields("ConfigMap", {}) is None  # not a custom resource


def test_preserve_unknown_fields_keeps_a_subtree_but_prunes_its_declared_parts():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                                        "properties": {"known": {"type": "object", "properties": {
                                                            "a": {"type": "string"}}}}}}}
    obj = {"spec": {"free": {"x": 1}, "known": {"a": "1", "b": 2}}}
    assert structural.prune(obj, schema) == ["spec.known.b"]
    assert obj == {"spec": {"free": {"x": 1}, "known": {"a": "1"}}}


def test_embedded_resources_keep_their_type_and_metadata():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": True, "properties": {"spec": {"type": "object"}}}}}}}
    obj = {"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {},
                                 "other": 1}}}
    assert structural.prune(obj, schema) == ["spec.template.other"]
    assert set(obj["spec"]["template"]) == {"apiVersion", "kind", "metadata", "spec"}


@pytest.mark.parametrize("mode, outcome", [("Strict", 400), ("Warn", ['unknown field "spec.bogus"']), ("Ignore", [])])
def test_field_validation_of_a_custom_resource(mode, outcome):
    kind = Kinds().by_kind("trainer.kubeflow.org/v1alpha1", "TrainJob")
    job = trainjob(bogus=1)
    if outcome == 400:
        with pytest.raises(ApiError) as caught:
            validation.check(kind, job, mode, CoreSchemas())
        assert caught.value.code == 400 and caught.value.message == (
            'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding error: unknown field '
            '"spec.bogus"')
    else:
        assert validation.check(kind, job, mode, CoreSchemas()) == outcome


def test_ratcheting_an_unchanged_invalid_value_does_not_block_an_update(cluster):
    """An object stored before a stricter schema (here: written past admission) stays updatable
    while its invalid part is unchanged; changing that part is judged again."""
    old = _trainer(image="i" * 600)  # maxLength 500
    structural.default(old, crds.schema("TrainJob"))
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    cluster.admit(new, old)
    new["spec"]["trainer"]["image"] = "j" * 600
    assert "spec.trainer.image: Too long: may not be more than 500 bytes" in cluster.refused(new, old).message


def test_ratcheting_turns_an_unchanged_rule_failure_into_a_warning(cluster):
    old = trainjob(managedBy="example.com/other")
    structural.default(old, crds.schema("TrainJob"))
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    assert cluster.admit(new, old) == ['spec.managedBy: Invalid value: "example.com/other": ManagedBy must be '
                                       "trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"]


def test_a_jobset_gets_its_crd_defaults(cluster):
    js = jobset()
    cluster.admit(js)
    assert js["spec"]["replicatedJobs"][0]["replicas"] == 1


def test_the_old_object_is_defaulted_as_read_from_storage(cluster):
    """The API server defaults an object decoded from etcd as well: a runtime stored without the
    defaults (written before them, or past admission) is not changed by applying it again."""
    old = manifest("manifests/runtime.yaml")  # as stored, never defaulted
    cluster.admit(copy.deepcopy(old), old)
