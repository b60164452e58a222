"""Kubeflow Trainer v2.3.0's webhooks, each rule both ways, with upstream's message:
pkg/webhooks/trainjob_webhook.go (defaulter; validator → pkg/runtime/core/{,cluster}trainingruntime.go
ValidateObjects → plugins/torch/torch.go and plugins/jobset/jobset.go Validate) and
pkg/webhooks/{,cluster}trainingruntime_webhook.go (validateReplicatedJobs)."""

from __future__ import annotations

import copy

import pytest

from backend.local.registry.upstream import trainer as trainer_rules
from tests.registry.crds.conftest import NOW, manifest, trainjob
from tests.registry.crds.test_cel_rules import _init_runtime

DENIED = 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
REF = '{"name":"%s","apiGroup":"trainer.kubeflow.org","kind":"%s"}'


def _denied(cluster, obj, old=None) -> str:
    refused = cluster.refused(obj, old)
    assert refused.code == 403 and refused.reason == "Forbidden" and refused.message.startswith(DENIED)
    return refused.message[len(DENIED):]


def _lesson(**changes):
    job = manifest("manifests/trainjob.yaml")
    job["spec"].update(changes)
    return job


def _patch_pod(job):
    return (job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
            ["template"]["spec"]["template"]["spec"])


def test_unsupported_runtime_kind(cluster):
    """trainjob_webhook.go ValidateCreate: "unsupported runtime: <Kind.group>"."""
    assert _denied(cluster, trainjob(runtimeRef={"name": "torch-distributed", "kind": "Runtime"})) == \
        "unsupported runtime: Runtime.trainer.kubeflow.org"
    assert _denied(cluster, trainjob(runtimeRef={"name": "torch-distributed", "apiGroup": "example.com"})) == \
        "unsupported runtime: ClusterTrainingRuntime.example.com"
    cluster.admit(trainjob())


def test_the_runtime_must_exist(cluster):
    """ValidateObjects: the referenced runtime, namespaced in the job's namespace, or cluster-wide
    (whose path upstream spells `spec.RuntimeRef`)."""
    assert _denied(cluster, trainjob(runtimeRef={"name": "nope", "kind": "TrainingRuntime"})) == (
        "spec.runtimeRef: Invalid value: " + REF % ("nope", "TrainingRuntime") + ': trainingruntimes.trainer.'
        'kubeflow.org "nope" not found: specified trainingRuntime must be created before the TrainJob is created')
    assert _denied(cluster, trainjob(runtimeRef={"name": "nope"})) == (
        "spec.RuntimeRef: Invalid value: " + REF % ("nope", "ClusterTrainingRuntime") + ': clustertrainingruntimes.'
        'trainer.kubeflow.org "nope" not found: specified clusterTrainingRuntime must be created before the TrainJob '
        "is created")
    other = trainjob(runtimeRef={"name": "kfcockpit-torch", "kind": "TrainingRuntime"})
    other["metadata"]["namespace"] = "team"
    assert "not found" in _denied(cluster, other)  # a TrainingRuntime of another namespace is not found
    cluster.admit(trainjob(runtimeRef={"name": "kfcockpit-torch", "kind": "TrainingRuntime"}))


def test_a_deprecated_cluster_runtime_warns(cluster):
    runtime = manifest("manifests/embedded/torch-distributed.yaml", 2, namespace=None)
    runtime["metadata"].update(name="old-torch", labels={"trainer.kubeflow.org/support": "deprecated"})
    policy = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
    assert cluster.admit(copy.deepcopy(runtime)) == [
        f'ClusterTrainingRuntime "old-torch" is deprecated and will be removed in a future release of Kubeflow '
        f"Trainer. See runtime deprecation policy: {policy}"]
    cluster.put(runtime)
    assert cluster.admit(trainjob(runtimeRef={"name": "old-torch"})) == [
        f'Referenced ClusterTrainingRuntime "old-torch" is deprecated and will be removed in a future release of '
        f"Kubeflow Trainer. See runtime deprecation policy: {policy}"]
    assert cluster.admit(trainjob()) == []


def test_torch_env_injection_targets_must_exist(cluster):
    """torch.go validateEnvInjectionTargets, on the runtime merged with the job's patches."""
    runtime = manifest("manifests/runtime.yaml")
    runtime["metadata"]["name"] = "injecting"
    runtime["spec"]["mlPolicy"]["torch"] = {"envInjection": {"targets": [{"jobName": "node",
                                                                          "containerNames": ["preflight"]}]}}
    cluster.put(runtime)
    ref = {"name": "injecting", "kind": "TrainingRuntime"}
    assert _denied(cluster, trainjob(runtimeRef=ref)) == (
        'spec.runtimeRef: Invalid value: {"jobName":"node","containerNames":["preflight"]}: envInjection target '
        'podSet "node" container "preflight" not found in runtime template')
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["initContainers"] = [{"name": "preflight", "image": "x"}]
    cluster.admit(trainjob(runtimeRef=ref))


def test_torch_reserved_envs(cluster):
    job = trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "2"}, {"name": "A", "value": "1"},
                                    {"name": "PET_MASTER_PORT", "value": "1"}]})
    assert _denied(cluster, job) == (
        'spec.trainer.env: Invalid value: [{"name":"PET_NNODES","value":"2"},{"name":"A","value":"1"},'
        '{"name":"PET_MASTER_PORT","value":"1"}]: must not have reserved envs, invalid envs configured: '
        "[PET_MASTER_PORT PET_NNODES]")
    cluster.admit(trainjob(trainer={"env": [{"name": "A", "value": "1"}]}))


@pytest.mark.parametrize("which, config", [("dataset", "datasetConfig"), ("model", "modelConfig")])
def test_initializers_need_their_jobs(cluster, which, config):
    """jobset.go Validate: an initializer needs its job, container and `initializer` mount."""
    cluster.put(_init_runtime())
    job = trainjob(initializer={which: {"storageUri": "hf://a"}})
    name = f"{which}-initializer"
    ref = "spec.runtimeRef: Invalid value: " + REF % ("torch-distributed", "ClusterTrainingRuntime") + ": "
    assert _denied(cluster, job) == ref + f"must have {name} job when trainJob is configured with input {config}"
    broken = _init_runtime()
    broken["metadata"]["name"] = "broken"
    jobs = {j["name"]: j for j in broken["spec"]["template"]["spec"]["replicatedJobs"]}
    container = jobs[name]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = []
    cluster.put(broken)
    job = trainjob(runtimeRef={"name": "broken"}, initializer={which: {"storageUri": "hf://a"}})
    assert _denied(cluster, job) == "spec.runtimeRef: Invalid value: " + REF % ("broken", "ClusterTrainingRuntime") + \
        f": must have volumeMount with name - initializer in container {name} of the {name} job"
    container["name"] = "other"
    assert _denied(cluster, job).endswith(f": must have container with name - {name} in the {name} job")
    cluster.admit(trainjob(runtimeRef={"name": "with-initializers"}, initializer={which: {"storageUri": "hf://a"}}))


@pytest.mark.parametrize("manager, problem", [
    ("kfcockpit", 'Invalid value: "kfcockpit": must be a domain-prefixed path (such as "acme.io/foo")'),
    ("Kfcockpit.io/lesson", 'Invalid value: "Kfcockpit.io": a lowercase RFC 1123 subdomain must consist of lower '
                            "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                            "character (e.g. 'example.com', regex used for validation is "
                            r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ("kfcockpit.io/a lesson", 'Invalid value: "a lesson": Invalid path (regex used for validation is '
                              r"'[A-Za-z0-9/\-._~%!$&'()*+,;=:]+')"),
])
def test_patch_managers_are_domain_prefixed_paths(cluster, manager, problem):
    """jobset.go Validate: validation.IsDomainPrefixedPath(spec.runtimePatches.manager)."""
    job = _lesson()
    job["spec"]["runtimePatches"][0]["manager"] = manager
    assert _denied(cluster, job) == f"spec.runtimePatches.manager: {problem}"
    cluster.admit(_lesson())


def test_patches_set_no_env_on_the_node_container(cluster):
    job = _lesson()
    _patch_pod(job)["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    assert _denied(cluster, job).endswith(": must not have envs for the dataset-initializer, model-initializer, node "
                                          "containers")
    assert _denied(cluster, job).startswith('spec.runtimePatches: Invalid value: [{"manager":"kfcockpit.io/lesson",')


def test_patched_containers_are_judged_on_the_merged_template(cluster):
    """ValidateObjects builds the runtime info from the template merged with the patches, so a
    container a patch adds is in it: upstream admits it (jobset.go's "doesn't exist" checks see
    the merged template)."""
    job = _lesson()
    _patch_pod(job)["containers"].append({"name": "sidecar", "image": "x"})
    cluster.admit(job)


def test_patches_change_only_while_suspended(cluster):
    """jobset.go checkRuntimePatchesImmutability."""
    old = _lesson()
    cluster.admit(old)
    new = copy.deepcopy(old)
    _patch_pod(new)["nodeSelector"] = {"zone": "a"}
    assert _denied(cluster, new, old) == ("spec.runtimePatches: Forbidden: RuntimePatches can only be modified when "
                                          "the TrainJob is suspended before or after the update")
    new["spec"]["suspend"] = True
    cluster.admit(copy.deepcopy(new), old)
    cluster.put({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                 "metadata": {"name": "lesson-ddp", "namespace": "default"},
                 "status": {"replicatedJobsStatus": [{"name": "node", "active": 1}]}})
    assert _denied(cluster, new, old) == ("spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the "
                                          "JobSet's ReplicatedJob node is still active")


def test_runtime_patch_times(cluster):
    """TrainJobDefaulter.Default: time set on create; kept for an unchanged patch, renewed for a changed one."""
    old = _lesson(suspend=True)
    cluster.admit(old)
    assert old["spec"]["runtimePatches"][0]["time"] == NOW
    old["spec"]["runtimePatches"][0]["time"] = "2025-01-01T00:00:00Z"
    same = copy.deepcopy(old)
    same["spec"]["runtimePatches"][0].pop("time")
    cluster.admit(same, old)
    assert same["spec"]["runtimePatches"][0]["time"] == "2025-01-01T00:00:00Z"
    changed = copy.deepcopy(old)
    _patch_pod(changed)["nodeSelector"] = {"zone": "a"}
    cluster.admit(changed, old)
    assert changed["spec"]["runtimePatches"][0]["time"] == NOW


@pytest.mark.parametrize("kind", ["TrainingRuntime", "ClusterTrainingRuntime"])
def test_runtime_ancestor_jobs(cluster, kind):
    """{,cluster}trainingruntime_webhook.go validateReplicatedJobs: replicas 1, the ancestor's container."""
    runtime = manifest("manifests/runtime.yaml", namespace="default" if kind == "TrainingRuntime" else None)
    runtime["kind"] = kind
    webhook = f'admission webhook "validator.{kind.lower()}.trainer.kubeflow.org" denied the request: '
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["replicas"] = 2
    refused = cluster.refused(copy.deepcopy(runtime))
    assert refused.code == 403 and refused.message == \
        webhook + "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1"
    node["replicas"] = 1
    pod = node["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["name"] = "trainer"
    refused = cluster.refused(copy.deepcopy(runtime))
    assert refused.message.startswith(webhook + "spec.template.spec.replicatedJobs[0].template.spec.template.spec."
                                      'containers: Invalid value: [{"name":"trainer","image":"kfcockpit-base:0.1.0",')
    assert refused.message.endswith(': must contain the required container for the ancestor: trainer')
    pod["containers"][0]["name"] = "node"
    cluster.admit(runtime)


def test_only_a_cluster_runtime_is_checked_on_update(cluster):
    for kind, namespace in (("TrainingRuntime", "default"), ("ClusterTrainingRuntime", None)):
        old = manifest("manifests/runtime.yaml", namespace=namespace)
        old["kind"] = kind
        cluster.admit(old)
        new = copy.deepcopy(old)
        new["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 3
        if kind == "TrainingRuntime":
            cluster.admit(new, old)  # TrainingRuntimeValidator.ValidateUpdate returns nothing
        else:
            assert "always must be 1" in cluster.refused(new, old).message


def test_a_dotted_runtime_name_is_valid(cluster):
    runtime = manifest("manifests/runtime.yaml")
    runtime["metadata"]["name"] = "torch.v2"
    cluster.put(runtime)
    cluster.admit(trainjob(runtimeRef={"name": "torch.v2", "kind": "TrainingRuntime"}))


@pytest.mark.parametrize("trainer, resources, procs", [
    ({"numProcPerNode": 3}, None, "3"),
    ({}, {"requests": {"cpu": "1500m"}}, "2"),
    ({}, {"limits": {"cpu": "3"}}, "3"),
    ({}, {"requests": {"memory": "1Gi"}}, "1"),
    ({}, {"limits": {"nvidia.com/gpu": 2}}, "auto"),
    ({}, None, "1"),
])
def test_num_proc_per_node(trainer, resources, procs):
    """torch.go EnforceMLPolicy: the job's numProcPerNode, else "auto": the CPU request (else limit)
    rounded up on CPU nodes, at least 1; with a GPU resource torchrun starts one per GPU."""
    runtime = manifest("manifests/runtime.yaml")
    job = trainjob(runtimeRef={"name": "kfcockpit-torch", "kind": "TrainingRuntime"}, trainer=dict(trainer))
    if resources is not None:
        job["spec"]["trainer"]["resourcesPerNode"] = resources
    assert trainer_rules.trainjob_num_proc_per_node(job, runtime) == procs


def test_num_proc_per_node_from_the_runtime_container():
    runtime = manifest("manifests/runtime.yaml")
    container = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]
    container["resources"] = {"requests": {"cpu": "4"}}
    assert trainer_rules.trainjob_num_proc_per_node(trainjob(), runtime) == "4"
