"""KubeRay v1.7.0's RayJob validation (ray-operator/controllers/ray/utils/validation.go
ValidateRayJobMetadata, ValidateRayJobSpec, ValidateRayClusterSpec, validateDeletionConfiguration),
each rule both ways. KubeRay's default install has no webhook: these are what the operator's
reconcile reports (`ValidationFailed`), so the API admits such a RayJob (its schema and CEL
rules allowing)."""

from __future__ import annotations

import copy

import pytest

from backend.local.registry.upstream.kuberay import validate_rayjob
from tests.registry.crds.conftest import manifest

SPEC = "The RayJob spec is invalid: "


def _head(job):
    return job["spec"]["rayClusterSpec"]["headGroupSpec"]


def _worker(job):
    return job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]


def _env(container_owner, name, value):
    container_owner["template"]["spec"]["containers"][0].setdefault("env", []).append({"name": name, "value": value})


CASES = [
    ("metadata", lambda j: j["metadata"].update(name="r" * 48),
     ("InvalidRayJobMetadata", "The RayJob metadata is invalid: RayJob name should be no more than 47 characters")),
    ("metadata", lambda j: j["metadata"].update(name="9ray"),
     ("InvalidRayJobMetadata", "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: [a "
      "DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
      "and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
      "'[a-z]([-a-z0-9]*[a-z0-9])?')]")),
    ("suspend", lambda j: j["spec"].update(suspend=True, shutdownAfterJobFinishes=False),
     SPEC + "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"),
    ("ttl", lambda j: j["spec"].update(shutdownAfterJobFinishes=False, ttlSecondsAfterFinished=10),
     SPEC + "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"),
    ("rules and shutdown", lambda j: j["spec"].update(deletionStrategy={"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}]}),
     SPEC + "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"),
    ("legacy DeleteNone", lambda j: j["spec"].update(deletionStrategy={"onSuccess": {"policy": "DeleteNone"},
                                                                       "onFailure": {"policy": "DeleteCluster"}}),
     SPEC + "shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'"),
    ("cluster spec or selector", lambda j: j["spec"].pop("rayClusterSpec"),
     SPEC + "one of RayClusterSpec or ClusterSelector must be set"),
    ("selector names a cluster", lambda j: (j["spec"].pop("rayClusterSpec"),
                                            j["spec"].update(clusterSelector={"app": "x"})),
     "cluster name in ClusterSelector should not be empty"),
    ("interactive backoff", lambda j: j["spec"].update(submissionMode="InteractiveMode", backoffLimit=1),
     SPEC + "BackoffLimit is incompatible with InteractiveMode"),
    ("sidecar submitter template", lambda j: j["spec"].update(submissionMode="SidecarMode",
                                                              submitterPodTemplate={"spec": {"containers": []}}),
     "Currently, SidecarMode doesn't support SubmitterPodTemplate"),
    ("head container", lambda j: _head(j)["template"]["spec"].update(containers=[]),
     SPEC + "headGroupSpec should have at least one container"),
    ("head resources twice", lambda j: _head(j).update(resources={"cpu": "1"}),
     SPEC + "resource fields should not be set in both rayStartParams and Resources for Head group; please use only "
            "one"),
    ("worker replicas bounds", lambda j: _worker(j).update(minReplicas=3),
     SPEC + "worker group workers has minReplicas 3 greater than maxReplicas 2"),
    ("worker replicas set", lambda j: _worker(j).pop("maxReplicas"),
     SPEC + "worker group workers must set both minReplicas and maxReplicas when autoscaling is disabled"),
    ("labels param", lambda j: _worker(j)["rayStartParams"].update(labels="a=b"),
     SPEC + "rayStartParams['labels'] is not supported for workers group; please use the top-level Labels field "
            "instead"),
    ("redis address", lambda j: _env(_head(j), "RAY_REDIS_ADDRESS", "redis:6379"),
     SPEC + "RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions is "
            "not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance"),
    ("autoscaler v2 env", lambda j: _env(_head(j), "RAY_enable_autoscaler_v2", "true"),
     SPEC + "environment variable RAY_enable_autoscaler_v2 cannot be set to 'true' when enableInTreeAutoscaling is "
            "false. Please set enableInTreeAutoscaling: true to use autoscaler v2"),
    ("token auth version", lambda j: j["spec"]["rayClusterSpec"].update(authOptions={"mode": "token"},
                                                                         rayVersion="2.40.0"),
     SPEC + "authOptions.mode is 'token' but minimum Ray version is 2.52.0, got 2.40.0"),
    ("runtime env yaml", lambda j: j["spec"].update(runtimeEnvYAML="env_vars: [1, 2"),
     "failed to unmarshal RuntimeEnvYAML: env_vars: [1, 2: "),
    ("deadline", lambda j: j["spec"].update(activeDeadlineSeconds=0),
     SPEC + "activeDeadlineSeconds must be a positive integer"),
    ("backoff", lambda j: j["spec"].update(backoffLimit=-1), SPEC + "backoffLimit must be a positive integer"),
]


@pytest.mark.parametrize("rule, fault, expected", CASES, ids=[c[0] for c in CASES])
def test_rayjob_rule(rule, fault, expected):
    job = manifest("manifests/rayjob.yaml")
    assert validate_rayjob(copy.deepcopy(job)) is None  # the lesson's RayJob passes
    fault(job)
    reason, message = validate_rayjob(job)
    if isinstance(expected, tuple):
        assert (reason, message) == expected
    else:
        assert reason == "InvalidRayJobSpec" and message.startswith(expected)


def test_a_rayjob_kuberay_fails_is_still_admitted(cluster):
    """No webhook in KubeRay's config/default: the API stores it; the operator fails it."""
    job = manifest("manifests/rayjob.yaml")
    job["spec"].update(suspend=True, shutdownAfterJobFinishes=False)
    cluster.admit(job)
