"""KubeRay v1.7.0's RayJob validation (ray-project/kuberay
ray-operator/controllers/ray/utils/validation.go: ValidateRayJobMetadata, ValidateRayJobSpec
with ValidateRayClusterSpec and the deletion strategy checks), feature gates at their
v1.7.0 defaults (RayJobDeletionPolicy on; network policies, mTLS, history server, embedded GCS
storage off).

KubeRay's default install (config/default) has no admission webhook: a RayJob these rules
refuse is still created, and the operator's reconcile (rayjob_controller.go `validateRayJob`)
marks it `jobDeploymentStatus: ValidationFailed`, `reason: ValidationFailed`, `message: <err>`,
with a Warning event `InvalidRayJobSpec` (or `InvalidRayJobMetadata`) saying
`<namespace>/<name>: <err>`. So `validate_rayjob` returns (event reason, message) or None, for
the RayJob controller to apply; nothing here refuses a request.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from backend.local.registry import names

MAX_RAYJOB_NAME = 53 - 6  # MaxRayClusterNameLength - 6
_INVALID_SPEC = "The RayJob spec is invalid: "
_V2_ENV = "RAY_enable_autoscaler_v2"


class Invalid(Exception):
    pass


def _env(container: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((e for e in container.get("env") or [] if e.get("name") == name), None)


def _containers(group: dict[str, Any]) -> list[dict[str, Any]]:
    return (((group.get("template") or {}).get("spec")) or {}).get("containers") or []


def _version(text: str) -> tuple[int, ...] | None:
    found = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(x or 0) for x in found.groups()) if found else None


def _ray_at_least(spec: dict[str, Any], minimum: tuple[int, ...], prefix: str) -> tuple[int, ...]:
    """The spec's rayVersion, parsed, refused as the operator refuses a feature that needs `minimum`
    (the same three messages for each feature, `prefix` naming it)."""
    version = spec.get("rayVersion") or ""
    least = ".".join(map(str, minimum))
    if not version:
        raise Invalid(f"{prefix} RayVersion was not specified. Ray version {least} or later is required")
    parsed = _version(version)
    if parsed is None:
        raise Invalid(f'{prefix} RayVersion format is invalid: {version}, could not parse "{version}" as version')
    if parsed < minimum:
        raise Invalid(f"{prefix} minimum Ray version is {least}, got {version}")
    return parsed


def _group_checks(name: str, group: dict[str, Any]) -> None:
    params = group.get("rayStartParams") or {}
    if any(params.get(k) for k in ("num-cpus", "num-gpus", "memory", "resources")) and group.get("resources"):
        raise Invalid(f"resource fields should not be set in both rayStartParams and Resources for {name} group; "
                      "please use only one")
    if "labels" in params:
        raise Invalid(f"rayStartParams['labels'] is not supported for {name} group; please use the top-level Labels "
                      "field instead")
    problems = []
    for key, value in (group.get("labels") or {}).items():
        problems += [f"invalid label key for {name} group: '{key}', error: {p}" for p in names.qualified_name(key)]
        problems += [f"invalid label value for key '{key}' in {name} group: '{value}', error: {p}"
                     for p in names.label_value(value)]
    if problems:
        raise Invalid("; ".join(problems))


def _worker_checks(group: dict[str, Any], spec: dict[str, Any], autoscaling: bool, head: dict[str, Any]) -> None:
    name = group.get("groupName", "")
    if not _containers(group):
        raise Invalid("workerGroupSpec should have at least one container")
    low, high = group.get("minReplicas"), group.get("maxReplicas")
    if not autoscaling and (low is None or high is None):
        raise Invalid(f"worker group {name} must set both minReplicas and maxReplicas when autoscaling is disabled")
    if low is not None and low < 0:
        raise Invalid(f"worker group {name} has negative minReplicas {low}")
    if high is not None and high < 0:
        raise Invalid(f"worker group {name} has negative maxReplicas {high}")
    if low is not None and high is not None and low > high:
        raise Invalid(f"worker group {name} has minReplicas {low} greater than maxReplicas {high}")
    _group_checks(name, group)
    v2 = ((spec.get("autoscalerOptions") or {}).get("version") == "v2"
          or (_env(head, _V2_ENV) or {}).get("value") in ("1", "true"))
    idle = group.get("idleTimeoutSeconds")
    if idle is not None:
        if idle < 0:
            raise Invalid(f"worker group {name}: idleTimeoutSeconds must be non-negative, got {idle}")
        if not v2:
            raise Invalid(f"worker group {name}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please "
                          f"set .spec.autoscalerOptions.version to 'v2' (or set {_V2_ENV} environment variable to "
                          "'true' in the head pod if using KubeRay < 1.4.0)")
    priority = group.get("priority")
    if priority:
        _ray_at_least(spec, (2, 56, 0), f"worker group {name}: priority is set, but")
        if not v2:
            raise Invalid(f"worker group {name}: priority is set to {priority}, but autoscaler v2 is not enabled. "
                          "Priority is only supported with autoscaler v2 enabled")


def validate_cluster_spec(spec: dict[str, Any], annotations: dict[str, str]) -> None:
    """ValidateRayClusterSpec (raises Invalid)."""
    head_group = spec.get("headGroupSpec") or {}
    if not _containers(head_group):
        raise Invalid("headGroupSpec should have at least one container")
    _group_checks("Head", head_group)
    head = _containers(head_group)[0]
    autoscaling = spec.get("enableInTreeAutoscaling") is True
    for group in spec.get("workerGroupSpecs") or []:
        _worker_checks(group, spec, autoscaling, head)
    ft = spec.get("gcsFaultToleranceOptions")
    if annotations.get("ray.io/ft-enabled") and ft is not None:
        raise Invalid("ray.io/ft-enabled annotation and GcsFaultToleranceOptions are both set. Please use only "
                      "GcsFaultToleranceOptions to configure GCS fault tolerance")
    ft_enabled = (annotations.get("ray.io/ft-enabled") or "").lower() == "true" or ft is not None
    if not ft_enabled and _env(head, "RAY_REDIS_ADDRESS"):
        raise Invalid("RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance, but "
                      "GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to enable GCS fault "
                      "tolerance")
    if ft is not None:
        if (head_group.get("rayStartParams") or {}).get("redis-password"):
            raise Invalid("cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled "
                          "- use GcsFaultToleranceOptions.RedisPassword instead")
        for env, field in (("REDIS_PASSWORD", "RedisPassword"), ("RAY_REDIS_ADDRESS", "RedisAddress")):
            if _env(head, env):
                raise Invalid(f"cannot set `{env}` env var in head Pod when GcsFaultToleranceOptions is enabled - use "
                              f"GcsFaultToleranceOptions.{field} instead")
        if annotations.get("ray.io/external-storage-namespace"):
            raise Invalid("cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions is "
                          "enabled - use GcsFaultToleranceOptions.ExternalStorageNamespace instead")
        if ft.get("backend") == "rocksdb":
            raise Invalid("the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: "
                          "'rocksdb') requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled")
        if ft.get("storage") is not None:
            raise Invalid("cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only applies to "
                          "the 'rocksdb' backend")
    if (head_group.get("rayStartParams") or {}).get("redis-username") or _env(head, "REDIS_USERNAME"):
        raise Invalid("cannot set redis username in rayStartParams or environment variables - use "
                      "GcsFaultToleranceOptions.RedisUsername instead")
    _autoscaler_checks(spec, head_group, head, autoscaling)
    _auth_and_gates(spec)


def _autoscaler_checks(spec: dict[str, Any], head_group: dict[str, Any], head: dict[str, Any], on: bool) -> None:
    v2_env = _env(head, _V2_ENV)
    options = spec.get("autoscalerOptions") or {}
    if not on and v2_env and v2_env.get("value") in ("1", "true"):
        raise Invalid(f"environment variable {_V2_ENV} cannot be set to '{v2_env['value']}' when "
                      "enableInTreeAutoscaling is false. Please set enableInTreeAutoscaling: true to use autoscaler v2")
    if on:
        for group in spec.get("workerGroupSpecs") or []:
            if group.get("suspend"):
                raise Invalid(f"worker group {group.get('groupName', '')} cannot be suspended with Autoscaler enabled")
        if options.get("version") is not None and v2_env:
            raise Invalid(f"both .spec.autoscalerOptions.version and head Pod env var {_V2_ENV} are set, please only "
                          "use the former")
        if options.get("version") == "v2":
            if (((head_group.get("template") or {}).get("spec") or {}).get("restartPolicy") or "Never") != "Never":
                raise Invalid("restartPolicy for head Pod should be Never or unset when using autoscaler V2")
            for group in spec.get("workerGroupSpecs") or []:
                if (((group.get("template") or {}).get("spec") or {}).get("restartPolicy") or "Never") != "Never":
                    raise Invalid(f"restartPolicy for worker group {group.get('groupName', '')} should be Never or "
                                  "unset when using autoscaler V2")
    idle = options.get("idleTimeoutSeconds")
    if idle is not None and idle < 0:
        raise Invalid(f"autoscalerOptions.idleTimeoutSeconds must be non-negative, got {idle}")
    if _env(options, "KUBERAY_GEN_AUTOSCALER_START_CMD"):
        raise Invalid("autoscalerOptions.env must not contain KUBERAY_GEN_AUTOSCALER_START_CMD: it is managed by "
                      "KubeRay and injected automatically into the autoscaler container")


def _auth_and_gates(spec: dict[str, Any]) -> None:
    if spec.get("historyServerOptions") is not None:
        raise Invalid("RayClusterHistoryServer feature gate is not enabled")
    auth = spec.get("authOptions") or {}
    k8s_auth = auth.get("enableK8sTokenAuth") is True
    if auth.get("mode") == "token":
        parsed = _ray_at_least(spec, (2, 52, 0), "authOptions.mode is 'token' but")
        version = spec["rayVersion"]
        if k8s_auth and parsed < (2, 55, 0):
            raise Invalid(f"authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got {version}")
        if k8s_auth and auth.get("secretName"):
            raise Invalid("authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set")
    elif k8s_auth:
        raise Invalid("authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'")
    if spec.get("networkPolicy") is not None:
        raise Invalid("spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled")
    if spec.get("tlsOptions") is not None:
        raise Invalid("spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled")


def _deletion_checks(spec: dict[str, Any]) -> None:
    """validateDeletionConfiguration (deletion rules' per-rule checks: the CRD's CEL rules cover
    the shape; the policy consistency checks are here)."""
    shutdown = spec.get("shutdownAfterJobFinishes") is True
    if not shutdown and (spec.get("ttlSecondsAfterFinished") or 0) > 0:
        raise Invalid(_INVALID_SPEC + "a RayJob with shutdownAfterJobFinishes set to false cannot have "
                      "TTLSecondsAfterFinished")
    strategy = spec.get("deletionStrategy")
    if strategy is None:
        return
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = bool(strategy.get("deletionRules"))
    if rules and shutdown:
        raise Invalid(_INVALID_SPEC + "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are "
                                      "mutually exclusive")
    if rules and legacy:
        raise Invalid(_INVALID_SPEC + "Cannot use both legacy onSuccess/onFailure fields and deletionRules "
                                      "simultaneously")
    if not legacy and not rules:
        raise Invalid(_INVALID_SPEC + "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the "
                                      "deletionRules field (cannot be empty)")
    if legacy:
        on_success, on_failure = strategy.get("onSuccess"), strategy.get("onFailure")
        if on_success is None or on_failure is None:
            raise Invalid("both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the "
                          "legacy deletion policy fields of DeletionStrategy")
        for which, policy in (("OnSuccess", on_success), ("OnFailure", on_failure)):
            if policy.get("policy") is None:
                raise Invalid(f"the DeletionPolicyType field of DeletionStrategy.{which} cannot be unset when "
                              "DeletionStrategy is enabled")
        if shutdown and "DeleteNone" in (on_success["policy"], on_failure["policy"]):
            raise Invalid(_INVALID_SPEC + "shutdownAfterJobFinshes is set to 'true' while deletion policy is "
                                          "'DeleteNone'")


def validate_rayjob_spec(obj: dict[str, Any]) -> None:
    """ValidateRayJobSpec (raises Invalid with upstream's message)."""
    spec = obj.get("spec") or {}
    suspend, shutdown = spec.get("suspend") is True, spec.get("shutdownAfterJobFinishes") is True
    if suspend and not shutdown:
        raise Invalid(_INVALID_SPEC + "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be "
                                      "suspended")
    if (spec.get("ttlSecondsAfterFinished") or 0) < 0:
        raise Invalid(_INVALID_SPEC + "TTLSecondsAfterFinished must be a non-negative integer")
    _deletion_checks(spec)
    selector = spec.get("clusterSelector") or {}
    mode, backoff = spec.get("submissionMode") or "K8sJobMode", spec.get("backoffLimit")
    if suspend and selector:
        raise Invalid(_INVALID_SPEC + "the ClusterSelector mode doesn't support the suspend operation")
    if spec.get("rayClusterSpec") is None and not selector:
        raise Invalid(_INVALID_SPEC + "one of RayClusterSpec or ClusterSelector must be set")
    if selector:
        if not selector.get("ray.io/cluster"):
            raise Invalid("cluster name in ClusterSelector should not be empty")
        if mode == "SidecarMode":
            raise Invalid("ClusterSelector is not supported in SidecarMode")
        if backoff is not None and backoff > 0:
            raise Invalid(_INVALID_SPEC + "BackoffLimit is incompatible with ClusterSelector mode")
    if mode == "InteractiveMode" and backoff is not None and backoff > 0:
        raise Invalid(_INVALID_SPEC + "BackoffLimit is incompatible with InteractiveMode")
    cluster = spec.get("rayClusterSpec")
    if mode == "SidecarMode":
        if spec.get("submitterPodTemplate") is not None:
            raise Invalid("Currently, SidecarMode doesn't support SubmitterPodTemplate")
        if spec.get("submitterConfig") is not None:
            raise Invalid("Currently, SidecarMode doesn't support SubmitterConfig")
        head_policy = ((((cluster or {}).get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
                       ).get("restartPolicy") or "Never"
        if head_policy != "Never":
            raise Invalid("restartPolicy for head Pod should be Never or unset when using SidecarMode")
    if cluster is not None:
        if (cluster.get("authOptions") or {}).get("enableK8sTokenAuth") is True:
            raise Invalid(_INVALID_SPEC + "K8s token auth mode is currently not supported for RayJob")
        try:
            validate_cluster_spec(cluster, (obj.get("metadata") or {}).get("annotations") or {})
        except Invalid as exc:
            raise Invalid(_INVALID_SPEC + str(exc)) from None
    env_yaml = spec.get("runtimeEnvYAML") or ""
    try:
        parsed = yaml.safe_load(env_yaml) if env_yaml else None
        if parsed is not None and not isinstance(parsed, dict):
            raise yaml.YAMLError(f"cannot unmarshal {type(parsed).__name__} into a map")
    except yaml.YAMLError as exc:
        raise Invalid(f"failed to unmarshal RuntimeEnvYAML: {env_yaml}: {exc}") from None
    for field, word in (("activeDeadlineSeconds", "activeDeadlineSeconds"),
                        ("preRunningDeadlineSeconds", "preRunningDeadlineSeconds")):
        if spec.get(field) is not None and spec[field] <= 0:
            raise Invalid(_INVALID_SPEC + f"{word} must be a positive integer")
    if backoff is not None and backoff < 0:
        raise Invalid(_INVALID_SPEC + "backoffLimit must be a positive integer")


def validate_rayjob(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(event reason, message) when the KubeRay operator would fail the RayJob's validation."""
    name = (obj.get("metadata") or {}).get("name") or ""
    if len(name) > MAX_RAYJOB_NAME:
        return ("InvalidRayJobMetadata", f"The RayJob metadata is invalid: RayJob name should be no more than "
                                         f"{MAX_RAYJOB_NAME} characters")
    problems = names.dns1035_label(name)
    if problems:
        return ("InvalidRayJobMetadata", "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 "
                                         f"label: [{' '.join(problems)}]")
    try:
        validate_rayjob_spec(obj)
    except Invalid as exc:
        return ("InvalidRayJobSpec", str(exc))
    return None
