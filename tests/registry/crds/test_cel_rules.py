"""Every x-kubernetes-validations rule of the vendored CRDs, both ways: an object the rule refuses
is refused with the CRD's message at the rule's field (apiextensions-apiserver v0.36
pkg/apiserver/schema/cel/validation.go: `<path>: Invalid value: ...: <message>`, `<nil>` at the
root), and the same object without the fault is admitted. Transition rules (`oldSelf`) are
checked on update. The rules are those of the files backend/local/registry/crds/data/ records as
sources (trainer v2.3.0 manifests/base/crds, jobset v0.12.0 config/components/crd/bases,
kuberay v1.7.0 ray-operator/config/crd/bases, external-snapshotter v8.6.0 client/config/crd).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from backend.local.registry import crds
from tests.registry.crds.conftest import jobset, manifest, trainjob

Change = Callable[[dict[str, Any]], Any]
POD = "template.spec.replicatedJobs[0].template.spec.template.spec"


def _at(obj: dict[str, Any], dotted: str) -> dict[str, Any]:
    node: Any = obj
    for part in dotted.replace("]", "").replace("[", ".").split("."):
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    return node


def _patched_job() -> dict[str, Any]:
    job = manifest("manifests/trainjob.yaml")
    _at(job, "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec."
             "template.spec").update(imagePullSecrets=[{"name": "a"}], serviceAccountName="sa",
                                     terminationGracePeriodSeconds=5, securityContext={"runAsUser": 1},
                                     initContainers=[{"name": "init"}])
    return job


def _init_runtime() -> dict[str, Any]:
    """A ClusterTrainingRuntime with dataset and model initializer jobs, as upstream's
    manifests/base/runtimes ones have (container and `initializer` volume mount each)."""
    runtime = manifest("manifests/embedded/torch-distributed.yaml", 2, namespace=None)
    runtime["metadata"]["name"] = "with-initializers"
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    for name in ("dataset-initializer", "model-initializer"):
        jobs.insert(0, {"name": name, "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": name}},
            "spec": {"template": {"spec": {"containers": [{"name": name, "image": "x", "volumeMounts": [
                {"name": "initializer", "mountPath": "/workspace"}]}]}}}}})
    return runtime


def _snapshot_content(**source: Any) -> dict[str, Any]:
    return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent", "metadata": {"name": "c"},
            "spec": {"deletionPolicy": "Delete", "driver": "hostpath.csi.k8s.io", "source": source or
                     {"snapshotHandle": "h"}, "volumeSnapshotRef": {"name": "s", "namespace": "default"}}}


CREATE = [
    # (rule, object, the fault, the error)
    ("trainjob name is an RFC 1035 label", trainjob, lambda o: o["metadata"].update(name="9job"),
     "<nil>: Invalid value: metadata.name must match RFC 1035 DNS label format"),
    ("trainjob name at most 63", trainjob, lambda o: o["metadata"].update(name="a" * 64),
     "<nil>: Invalid value: metadata.name must be no more than 63 characters"),
    ("trainjob managedBy", trainjob, lambda o: o["spec"].update(managedBy="example.com/mine"),
     'spec.managedBy: Invalid value: "example.com/mine": ManagedBy must be trainer.kubeflow.org/trainjob-controller '
     "or kueue.x-k8s.io/multikueue if set"),
    ("dataset storageUri", lambda: trainjob(runtimeRef={"name": "with-initializers"},
                                            initializer={"dataset": {"storageUri": "hf://a/b"}}),
     lambda o: o["spec"]["initializer"]["dataset"].update(storageUri="a/b"),
     'spec.initializer.dataset.storageUri: Invalid value: "a/b": storageUri may be empty, or it must be a valid URI '
     "(scheme://...)"),
    ("model storageUri", lambda: trainjob(runtimeRef={"name": "with-initializers"},
                                          initializer={"model": {"storageUri": ""}}),
     lambda o: o["spec"]["initializer"]["model"].update(storageUri="://x"),
     'spec.initializer.model.storageUri: Invalid value: "://x": storageUri may be empty, or it must be a valid URI '
     "(scheme://...)"),
    ("one ML policy", lambda: manifest("manifests/runtime.yaml"),
     lambda o: o["spec"]["mlPolicy"].update(mpi={}),
     "spec.mlPolicy: Invalid value: Only one of the policy can be configured"),
    ("flux numProcPerNode >= 1", lambda: manifest("manifests/runtime.yaml"),
     lambda o: o["spec"]["mlPolicy"].update(torch=None, flux={"numProcPerNode": 0}),
     "spec.mlPolicy.flux.numProcPerNode: Invalid value: 0: NumProcPerNode in fluxPolicy must be >= 1"),
    ("envInjection never names node", lambda: manifest("manifests/runtime.yaml"),
     lambda o: o["spec"]["mlPolicy"]["torch"].update(envInjection={"targets": [
         {"jobName": "node", "containerNames": ["node"]}]}),
     "spec.mlPolicy.torch.envInjection.targets[0].containerNames: Invalid value: containerNames must not include the "
     "main node container because PET_* envs are always injected into it"),
    ("runtime: InOrder startup and dependsOn", lambda: manifest("manifests/runtime.yaml"),
     lambda o: (o["spec"]["template"]["spec"].update(startupPolicy={"startupPolicyOrder": "InOrder"}),
                o["spec"]["template"]["spec"]["replicatedJobs"].append(
                    {"name": "after", "dependsOn": [{"name": "node", "status": "Ready"}],
                     "template": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}})),
     "spec.template.spec: Invalid value: StartupPolicy and DependsOn APIs are mutually exclusive"),
    ("runtime: claim templates have no namespace", lambda: manifest("manifests/runtime.yaml"),
     lambda o: o["spec"]["template"]["spec"].update(volumeClaimPolicies=[
         {"templates": [{"metadata": {"name": "data", "namespace": "other"}}]}]),
     "spec.template.spec.volumeClaimPolicies[0]: Invalid value: namespace cannot be set for VolumeClaimPolicies "
     "templates"),
    ("jobset: InOrder startup and dependsOn", jobset,
     lambda o: (o["spec"].update(startupPolicy={"startupPolicyOrder": "InOrder"}),
                o["spec"]["replicatedJobs"].append({"name": "b", "dependsOn": [{"name": "node", "status": "Ready"}],
                                                    "template": {"spec": {"template": {"spec": {"containers": [
                                                        {"name": "c"}]}}}}})),
     "spec: Invalid value: StartupPolicy and DependsOn APIs are mutually exclusive"),
    ("jobset: claim templates have no namespace", jobset,
     lambda o: o["spec"].update(volumeClaimPolicies=[{"templates": [{"metadata": {"name": "d", "namespace": "x"}}]}]),
     "spec.volumeClaimPolicies[0]: Invalid value: namespace cannot be set for VolumeClaimPolicies templates"),
    ("rayjob managedBy", lambda: manifest("manifests/rayjob.yaml"), lambda o: o["spec"].update(managedBy="me"),
     'spec.managedBy: Invalid value: "me": the managedBy field value must be either \'ray.io/kuberay-operator\' or '
     "'kueue.x-k8s.io/multikueue'"),
    ("rayjob rayClusterSpec.managedBy", lambda: manifest("manifests/rayjob.yaml"),
     lambda o: o["spec"]["rayClusterSpec"].update(managedBy="me"),
     'spec.rayClusterSpec.managedBy: Invalid value: "me": the managedBy field value must be either '
     "'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"),
    ("rayjob legacy and rules deletion", lambda: manifest("manifests/rayjob.yaml"),
     lambda o: o["spec"].update(deletionStrategy={"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {
         "policy": "DeleteCluster"}, "deletionRules": [{"policy": "DeleteCluster", "condition": {
             "jobStatus": "SUCCEEDED"}}]}),
     "spec.deletionStrategy: Invalid value: legacy policies (onSuccess/onFailure) and deletionRules cannot be used "
     "together within the same deletionStrategy"),
    ("rayjob deletion needs both or rules", lambda: manifest("manifests/rayjob.yaml"),
     lambda o: o["spec"].update(deletionStrategy={"onSuccess": {"policy": "DeleteCluster"}}),
     "spec.deletionStrategy: Invalid value: deletionStrategy requires either BOTH onSuccess and onFailure, OR the "
     "deletionRules field (cannot be empty)"),
    ("rayjob deletion condition: not both", lambda: manifest("manifests/rayjob.yaml"),
     lambda o: o["spec"].update(deletionStrategy={"deletionRules": [{"policy": "DeleteCluster", "condition": {
         "jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Failed"}}]}),
     "spec.deletionStrategy.deletionRules[0].condition: Invalid value: JobStatus and JobDeploymentStatus cannot be "
     "used together within the same deletion condition."),
    ("rayjob deletion condition: one", lambda: manifest("manifests/rayjob.yaml"),
     lambda o: o["spec"].update(deletionStrategy={"deletionRules": [{"policy": "DeleteCluster", "condition": {}}]}),
     "spec.deletionStrategy.deletionRules[0].condition: Invalid value: the deletion condition requires either the "
     "JobStatus or the JobDeploymentStatus field."),
    ("snapshot: exactly one source", lambda: manifest("manifests/snapshots/volumesnapshot.yaml"),
     lambda o: o["spec"]["source"].update(volumeSnapshotContentName="c"),
     "spec.source: Invalid value: exactly one of volumeSnapshotContentName and persistentVolumeClaimName must be set"),
    ("snapshot: class name not empty", lambda: manifest("manifests/snapshots/volumesnapshot.yaml"),
     lambda o: o["spec"].update(volumeSnapshotClassName=""),
     'spec.volumeSnapshotClassName: Invalid value: "": volumeSnapshotClassName must not be the empty string when set'),
    ("content: exactly one source", _snapshot_content, lambda o: o["spec"]["source"].update(volumeHandle="v"),
     "spec.source: Invalid value: exactly one of volumeHandle and snapshotHandle must be set"),
    ("content: snapshot ref name and namespace", _snapshot_content,
     lambda o: o["spec"]["volumeSnapshotRef"].pop("namespace"),
     "spec.volumeSnapshotRef: Invalid value: both spec.volumeSnapshotRef.name and spec.volumeSnapshotRef.namespace "
     "must be set"),
]

UPDATE = [
    # (rule, object, the change on update, the error)
    ("trainjob activeDeadlineSeconds", lambda: trainjob(activeDeadlineSeconds=60),
     lambda o: o["spec"].update(activeDeadlineSeconds=120),
     "spec.activeDeadlineSeconds: Invalid value: 120: field is immutable"),
    ("trainjob initializer", lambda: trainjob(runtimeRef={"name": "with-initializers"},
                                              initializer={"model": {"storageUri": "hf://a"}}),
     lambda o: o["spec"]["initializer"]["model"].update(storageUri="hf://b"),
     "spec.initializer: Invalid value: field is immutable"),
    ("trainjob managedBy", trainjob, lambda o: o["spec"].update(managedBy="kueue.x-k8s.io/multikueue"),
     'spec.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable'),
    ("trainjob runtimeRef", trainjob, lambda o: o["spec"]["runtimeRef"].update(name="other"),
     "spec.runtimeRef: Invalid value: field is immutable"),
    ("trainjob trainer", trainjob, lambda o: o["spec"]["trainer"].update(numNodes=2),
     "spec.trainer: Invalid value: field is immutable"),
] + [
    (f"trainjob patch {field}", _patched_job,
     lambda o, f=field, v=value: _at(o, "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]."
                                    "template.spec.template.spec").update({f: v}),
     f"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec."
     f"{field}: Invalid value: {shown}field is immutable")
    for field, value, shown in (("containers", [{"name": "node", "image": "y"}], ""),
                                ("imagePullSecrets", [{"name": "b"}], ""), ("initContainers", [{"name": "i2"}], ""),
                                ("securityContext", {"runAsUser": 2}, ""), ("serviceAccountName", "sb", '"sb": '),
                                ("terminationGracePeriodSeconds", 9, "9: "), ("volumes", [], ""))
] + [
    (f"runtime {field}", lambda f=field, v=before: _set(manifest("manifests/runtime.yaml"), f, v),
     lambda o, f=field, v=after: o["spec"]["template"]["spec"].update({f: v}),
     f"spec.template.spec.{field}: Invalid value: Value is immutable")
    for field, before, after in (
        ("failurePolicy", {"maxRestarts": 3}, {"maxRestarts": 4}),
        ("network", {"enableDNSHostnames": True}, {"enableDNSHostnames": False}),
        ("startupPolicy", {"startupPolicyOrder": "AnyOrder"}, {"startupPolicyOrder": "InOrder"}),
        ("successPolicy", {"operator": "All"}, {"operator": "Any"}),
        ("volumeClaimPolicies", [{"templates": [{"metadata": {"name": "d"}}]}],
         [{"templates": [{"metadata": {"name": "e"}}]}]))
] + [
    ("runtime dependsOn", lambda: _with_dependency(manifest("manifests/runtime.yaml"), "template.spec"),
     lambda o: o["spec"]["template"]["spec"]["replicatedJobs"][1]["dependsOn"][0].update(status="Complete"),
     "spec.template.spec.replicatedJobs[1].dependsOn: Invalid value: Value is immutable"),
    ("jobset failurePolicy", lambda: jobset(failurePolicy={"maxRestarts": 2}),
     lambda o: o["spec"].update(failurePolicy={"maxRestarts": 1}),
     "spec.failurePolicy: Invalid value: Value is immutable"),
    ("jobset dependsOn", lambda: _with_dependency(jobset(), ""),
     lambda o: o["spec"]["replicatedJobs"][1]["dependsOn"][0].update(status="Complete"),
     "spec.replicatedJobs[1].dependsOn: Invalid value: Value is immutable"),
    ("rayjob managedBy", lambda: _set_ray(manifest("manifests/rayjob.yaml"), managedBy="ray.io/kuberay-operator"),
     lambda o: o["spec"].update(managedBy="kueue.x-k8s.io/multikueue"),
     'spec.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": the managedBy field is immutable'),
    ("rayjob gcs backend", lambda: _gcs(manifest("manifests/rayjob.yaml")),
     lambda o: o["spec"]["rayClusterSpec"]["gcsFaultToleranceOptions"].update(backend="rocksdb"),
     'spec.rayClusterSpec.gcsFaultToleranceOptions.backend: Invalid value: "rocksdb": gcsFaultToleranceOptions.backend '
     "is immutable"),
    ("snapshot pvc immutable", lambda: manifest("manifests/snapshots/volumesnapshot.yaml"),
     lambda o: o["spec"]["source"].update(persistentVolumeClaimName="other"),
     'spec.source.persistentVolumeClaimName: Invalid value: "other": persistentVolumeClaimName is immutable'),
    ("snapshot pvc required once set", lambda: manifest("manifests/snapshots/volumesnapshot.yaml"),
     lambda o: o["spec"].update(source={"volumeSnapshotContentName": "c"}),
     "spec.source: Invalid value: persistentVolumeClaimName is required once set"),
    ("content snapshotHandle immutable", _snapshot_content, lambda o: o["spec"]["source"].update(snapshotHandle="h2"),
     'spec.source.snapshotHandle: Invalid value: "h2": snapshotHandle is immutable'),
    ("content volumeHandle required once set", lambda: _snapshot_content(volumeHandle="v"),
     lambda o: o["spec"].update(source={"snapshotHandle": "h"}),
     "spec.source: Invalid value: volumeHandle is required once set"),
    ("content sourceVolumeMode immutable", lambda: _mode(_snapshot_content()),
     lambda o: o["spec"].update(sourceVolumeMode="Block"),
     'spec.sourceVolumeMode: Invalid value: "Block": sourceVolumeMode is immutable'),
    ("content sourceVolumeMode required once set", lambda: _mode(_snapshot_content()),
     lambda o: o["spec"].pop("sourceVolumeMode"), "spec: Invalid value: sourceVolumeMode is required once set"),
]


def _with_dependency(obj: dict[str, Any], at: str) -> dict[str, Any]:
    spec = _at(obj, f"spec.{at}") if at else obj["spec"]
    spec["replicatedJobs"].append({"name": "after", "dependsOn": [{"name": "node", "status": "Ready"}],
                                   "template": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}})
    return obj


def _set(runtime: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    runtime["spec"]["template"]["spec"][field] = value
    return runtime


def _set_ray(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj["spec"].update(spec)
    return obj


def _gcs(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["rayClusterSpec"]["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379", "backend": "redis"}
    return obj


def _mode(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["sourceVolumeMode"] = "Filesystem"
    return obj


@pytest.fixture
def rules_cluster(cluster):
    cluster.put(_init_runtime())
    return cluster


@pytest.mark.parametrize("rule, make, fault, error", CREATE, ids=[c[0] for c in CREATE])
def test_create_rule(rules_cluster, rule, make, fault, error):
    good = make()
    rules_cluster.admit(copy.deepcopy(good))  # without the fault: admitted
    bad = copy.deepcopy(good)
    fault(bad)
    refused = rules_cluster.refused(bad)
    assert refused.code == 422 and refused.reason == "Invalid"
    assert refused.message == f'{crds.catalog.crd(bad["kind"]).qualified_kind} "{bad["metadata"]["name"]}" is ' \
                              f"invalid: {error}"


@pytest.mark.parametrize("rule, make, change, error", UPDATE, ids=[u[0] for u in UPDATE])
def test_transition_rule(rules_cluster, rule, make, change, error):
    old = make()
    if old["kind"] == "TrainJob":
        old["spec"]["suspend"] = True  # so the webhook's own runtimePatches rule stays out of the way
    rules_cluster.admit(old)
    rules_cluster.admit(copy.deepcopy(old), old)  # unchanged: admitted
    new = copy.deepcopy(old)
    change(new)
    refused = rules_cluster.refused(new, old)
    assert refused.code == 422 and error in refused.message.split(" is invalid: ", 1)[1]


def test_a_list_map_key_is_never_compared_with_its_old_self(rules_cluster):
    """runtimePatches[].manager `self == oldSelf`: a patch of another manager is another item of the
    map list, so the rule has no old value to compare; what refuses the change is the jobset
    plugin (jobset.go checkRuntimePatchesImmutability), the job not being suspended."""
    old = manifest("manifests/trainjob.yaml")
    rules_cluster.admit(old)
    new = copy.deepcopy(old)
    new["spec"]["runtimePatches"][0]["manager"] = "kfcockpit.io/other"
    refused = rules_cluster.refused(new, old)
    assert refused.code == 403 and refused.message.endswith(
        "spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before "
        "or after the update")


def test_status_rule_on_update(rules_cluster):
    """TrainJob status.trainerStatus needs lastUpdatedTime (checked where status is written)."""
    old = trainjob()
    rules_cluster.admit(old)
    new = copy.deepcopy(old)
    new["status"] = {"trainerStatus": {"progressPercentage": 5}}
    assert "status.trainerStatus: Invalid value: lastUpdatedTime is required when trainerStatus is present" in \
        rules_cluster.refused(new, old).message
    new["status"]["trainerStatus"]["lastUpdatedTime"] = "2026-01-02T03:04:05Z"
    rules_cluster.admit(new, old)
