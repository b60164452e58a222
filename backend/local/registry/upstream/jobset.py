"""JobSet v0.12.0's admission webhook (kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go),
with its feature gates at their defaults (InPlaceRestart, RestartJob and ElasticJobSet off).

- `default_jobset` (mutating `mjobset.kb.io`, on create): successPolicy `All`, startupPolicy
  `AnyOrder`, each replicated job's completionMode `Indexed` and its pods' restartPolicy
  `OnFailure` where empty, DNS hostnames and publishNotReadyAddresses on, unnamed failure policy
  rules named `failurePolicyRule<i>`, volume claim policies retained `Delete`.
- `validate_jobset` (validating `vjobset.kb.io`): on create, the generated job, pod and group
  names fit DNS-1035 labels, the subdomain, managedBy, dependsOn order, success and failure
  policy targets, rule names and job failure reasons, the coordinator and volume claim
  policies; on update, replicatedJobs and managedBy are immutable (pod template labels,
  annotations, node selector, tolerations and scheduling gates may change while suspended).
  Plain errors become `<nil>: Internal error: ...` as the webhook's toFieldErrorList makes them;
  the whole is a 422 Invalid the API server prefixes with the webhook's name.

JobSet's pod webhooks (kubernetes-sigs/jobset v0.12.0 pkg/webhooks/pod_webhook.go): exclusive
placement per topology, `alpha.jobset.sigs.k8s.io/exclusive-topology: <node label>` on a JobSet
or a replicated job, which the JobSet controller copies onto its Jobs' pods.

- default (mutating, on create): a JobSet pod records its priority in a label; with exclusive
  placement, the leader pod (completion index 0) gets a required pod affinity to its own Job's
  pods (job-key In [its key]) and a required anti-affinity to other Jobs' pods of its priority
  (job-key Exists, NotIn [its key]), both over the topology label, so one Job takes a domain and
  no other Job shares it; a follower gets a nodeSelector for its leader's domain, read from the
  leader's node.
- validate (on create): a follower is refused until its leader exists and is scheduled ("an
  expected, transient error": its Job controller tries again).

With the node-selector strategy (`alpha.jobset.sigs.k8s.io/node-selector`) the nodes are labelled
by hand and neither applies.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from backend.local.registry import fielderrors as fe
from backend.local.registry import names
from backend.local.registry.fielderrors import FieldError
from backend.local.registry.status import denied
from backend.local.registry.strategy import Lookup

VALIDATOR = "vjobset.kb.io"
QUALIFIED = "JobSet.jobset.x-k8s.io"
MAX_INT32 = 2**31 - 1
_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                    "PodFailurePolicy")
_TOO_LONG = "must be no more than 63 characters"
_REPLICATED_JOB = ("name", "groupName", "template", "replicas", "dependsOn")  # ReplicatedJob's JSON fields, in order


def _job_spec(rjob: dict[str, Any]) -> dict[str, Any]:
    return (rjob.get("template") or {}).setdefault("spec", {}) if isinstance(rjob.get("template"), dict) else {}


def default_jobset(obj: dict[str, Any]) -> None:
    """jobSetWebhook.Default, in place."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        pod = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod.get("restartPolicy"):
            pod["restartPolicy"] = "OnFailure"
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        if not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"
    for policy in spec.get("volumeClaimPolicies") or []:
        policy.setdefault("retentionPolicy", {"whenDeleted": "Delete"})


def _plain(message: str) -> FieldError:
    return fe.internal(None, message)


def _dns1035(path: str, value: str, too_long: str, shown: str | None = None) -> list[FieldError]:
    return [fe.invalid_value(path, value if shown is None else shown, too_long if _TOO_LONG in p else p)
            for p in names.dns1035_label(value)]


def _replicated_job_errors(obj: dict[str, Any], rjobs: list[dict[str, Any]]) -> list[FieldError]:
    errors, seen = [], set()
    name = obj["metadata"]["name"]
    for i, rjob in enumerate(rjobs):
        path = f"spec.replicatedJobs[{i}]"
        seen.add(rjob.get("name"))
        job = _job_spec(rjob)
        replicas = rjob.get("replicas", 1)
        if job.get("parallelism", 1) * replicas > MAX_INT32:
            errors.append(_plain(f"the product of replicas and parallelism must not exceed {MAX_INT32} for "
                                 f"replicatedJob '{rjob.get('name')}'"))
        errors += _dns1035(f"{path}.groupName", rjob.get("groupName", "default"),
                           ".spec.replicatedJob[].groupName is too long, must be less than 63 characters")
        longest_job = f"{name}-{rjob.get('name')}-{replicas - 1}"
        errors += _dns1035(f"{path}.name", longest_job,
                           "JobSet name is too long, job names generated for this JobSet will exceed 63 characters")
        if job.get("completionMode") == "Indexed" and job.get("completions") is not None:
            longest_pod = f"{name}-{rjob.get('name')}-{replicas - 1}-{job['completions'] - 1}-abcde"
            errors += _dns1035(f"{path}.name", longest_pod, "JobSet name is too long, pod names generated for this "
                                                            "JobSet will exceed 63 characters", shown=longest_job)
        for dependency in rjob.get("dependsOn") or []:
            if dependency.get("name") not in seen:
                errors.append(_plain(f"replicatedJob: {rjob.get('name')} cannot depend on replicatedJob: "
                                     f"{dependency.get('name')}"))
    return errors


def _failure_policy_errors(policy: dict[str, Any], rjob_names: set[str]) -> list[FieldError]:
    rules = policy.get("rules") or []
    if any(r.get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts") for r in rules):
        return [_plain("RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when "
                       "RestartJob feature gate is disabled")]
    errors, by_name = [], {}
    for index, rule in enumerate(rules):
        rule_name = rule.get("name") or ""
        if not 1 <= len(rule_name) <= 128:
            errors.append(_plain(f"invalid failure policy rule name of length {len(rule_name)}, the rule name must be "
                                 "at least 1 characters long and at most 128 characters long"))
        by_name.setdefault(rule_name, []).append(index)
        if not _RULE_NAME.match(rule_name):
            errors.append(_plain(f"invalid failure policy rule name '{rule_name}', a failure policy rule name must "
                                 "start with an alphabetic character, optionally followed by a string of alphanumeric "
                                 "characters or '_,:', and must end with an alphanumeric character or '_'"))
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in rjob_names:
                errors.append(_plain(f"invalid replicatedJob name '{target}' in failure policy does not appear in "
                                     ".spec.ReplicatedJobs"))
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in _FAILURE_REASONS:
                errors.append(_plain(f"invalid job failure reason '{reason}' in failure policy is not a recognized "
                                     "job failure reason"))
    for rule_name, indices in by_name.items():
        if len(indices) > 1:
            errors.append(_plain(f"rule names are not unique, rules with indices [{' '.join(map(str, indices))}] all "
                                 f"have the same name '{rule_name}'"))
    return errors


def _coordinator_errors(obj: dict[str, Any], rjobs: list[dict[str, Any]]) -> list[FieldError]:
    spec = obj["spec"]
    coordinator = spec["coordinator"]
    target = next((r for r in rjobs if r.get("name") == coordinator.get("replicatedJob")), None)
    job_index, pod_index = coordinator.get("jobIndex", 0), coordinator.get("podIndex", 0)
    if target is None:
        problem = f"coordinator replicatedJob {coordinator.get('replicatedJob')} does not exist"
    elif not 0 <= job_index < target.get("replicas", 1):
        problem = f"coordinator job index {job_index} is invalid for replicatedJob {target.get('name')}"
    elif _job_spec(target).get("completionMode") != "Indexed" or _job_spec(target).get("completions") is None:
        problem = "job for coordinator pod must be indexed completion mode, and completions number must be set"
    elif not 0 <= pod_index < _job_spec(target)["completions"]:
        problem = (f"coordinator pod index {pod_index} is invalid for replicatedJob "
                   f"{coordinator.get('replicatedJob')} job index {job_index}")
    else:
        problem = ""
    errors = [_plain(problem)] if problem else []
    subdomain = (spec.get("network") or {}).get("subdomain") or obj["metadata"]["name"]
    endpoint = f"{obj['metadata']['name']}-{coordinator.get('replicatedJob')}-{job_index}-{pod_index}.{subdomain}"
    problems = names.label_value(endpoint)
    if problems:
        errors.append(_plain(f'spec will lead to invalid label value "{endpoint}" for coordinator label '
                             f'"jobset.sigs.k8s.io/coordinator" (long JobSet / ReplicatedJob / SubDomain name?): '
                             f"{', '.join(problems)}"))
    return errors


def _volume_claim_errors(obj: dict[str, Any], rjobs: list[dict[str, Any]], lookup: Lookup) -> list[FieldError]:
    errors, claims = [], set()
    for p, policy in enumerate(obj["spec"].get("volumeClaimPolicies") or []):
        for t, template in enumerate(policy.get("templates") or []):
            path = f"spec.volumeClaimPolicies[{p}].template[{t}]"
            claim = (template.get("metadata") or {}).get("name") or ""
            if claim in claims:
                errors.append(fe.invalid_value(f"{path}.name", claim, "names must be unique for VolumeClaimPolicies "
                                                                      "template"))
            errors += [fe.invalid_value(f"{path}.name", claim, m) for m in names.dns1123_subdomain(claim)]
            pvc_name = f"{claim}-{obj['metadata']['name']}"
            if len(pvc_name) > 63:
                errors.append(fe.invalid_value(f"{path}.name", claim, "VolumeClaimPolicies template name is too long"))
            errors += _claim_mount_errors(rjobs, claim)
            existing = lookup("PersistentVolumeClaim", obj["metadata"].get("namespace"), pvc_name)
            if existing is not None:
                if existing.get("spec") != template.get("spec"):
                    errors.append(fe.invalid_value(f"{path}.spec", template.get("spec"), "spec does not match existing "
                                                   f"PVC {pvc_name} in namespace {obj['metadata'].get('namespace')}"))
                when = (policy.get("retentionPolicy") or {}).get("whenDeleted")
                if when is not None and when != "Retain":
                    errors.append(fe.invalid_value(f"spec.volumeClaimPolicies[{p}].retentionPolicy.whenDeleted", when,
                                                   "retentionPolicy must be retain when PVC exists"))
            claims.add(claim)
    return errors


def _claim_mount_errors(rjobs: list[dict[str, Any]], claim: str) -> list[FieldError]:
    errors, mounted = [], False
    for r, rjob in enumerate(rjobs):
        pod = (_job_spec(rjob).get("template") or {}).get("spec") or {}
        for v, volume in enumerate(pod.get("volumes") or []):
            if volume.get("name") == claim:
                errors.append(fe.invalid_value(f"spec.replicatedJobs[{r}].template.spec.template.spec.volumes[{v}].name",
                                               claim, f"volume name conflicts with VolumeClaimPolicy template name: "
                                                      f"{claim}"))
        mounted = mounted or any(m.get("name") == claim for c in (pod.get("initContainers") or [])
                                 + (pod.get("containers") or []) for m in c.get("volumeMounts") or [])
    if not mounted:
        errors.append(fe.invalid_value("spec.replicatedJobs", fe.go_list(rjobs, _REPLICATED_JOB),
                                       "replicatedJob containers don't have a matching "
                                                                     f"volumeMount: {claim} from VolumeClaimPolicies"))
    return errors


def _create_errors(obj: dict[str, Any], lookup: Lookup) -> list[FieldError]:
    spec = obj.get("spec") or {}
    rjobs = [r for r in spec.get("replicatedJobs") or [] if isinstance(r, dict)]
    errors = []
    if rjobs and rjobs[0].get("dependsOn") is not None:
        errors.append(_plain("DependsOn can't be set for the first ReplicatedJob"))
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain:
        path = "spec.network.subdomain"
        errors += [fe.invalid_value(path, subdomain, m) for m in names.dns1123_subdomain(subdomain)]
        errors += _dns1035(path, subdomain, ".spec.network.subdomain is too long, must be less than 63 characters")
    if spec.get("managedBy") is not None:
        errors += names.domain_prefixed_path("spec.managedBy", spec["managedBy"])
        if len(spec["managedBy"]) > 63:
            errors.append(fe.too_long("spec.managedBy", 63))
    errors += _replicated_job_errors(obj, rjobs)
    rjob_names = {r.get("name") for r in rjobs}
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in rjob_names:
            errors.append(_plain(f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs"))
    if spec.get("failurePolicy") is not None:
        errors += _failure_policy_errors(spec["failurePolicy"], rjob_names)
    if spec.get("coordinator") is not None:
        errors += _coordinator_errors(obj, rjobs)
    if spec.get("volumeClaimPolicies"):
        errors += _volume_claim_errors(obj, rjobs, lookup)
    return errors


def _update_errors(obj: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    spec, old_spec = obj.get("spec") or {}, old.get("spec") or {}
    munged = copy.deepcopy(spec.get("replicatedJobs") or [])
    before = {r.get("name"): r for r in old_spec.get("replicatedJobs") or []}
    if old_spec.get("suspend") or spec.get("suspend"):
        for rjob in munged:  # what Kueue may change on a suspended JobSet
            previous = before.get(rjob.get("name"))
            if previous is None:
                continue
            pod, old_pod = _job_spec(rjob).setdefault("template", {}), _job_spec(previous).get("template") or {}
            for key in ("annotations", "labels"):
                _copy_key(pod.setdefault("metadata", {}), (old_pod.get("metadata") or {}), key)
            for key in ("nodeSelector", "tolerations", "schedulingGates"):
                _copy_key(pod.setdefault("spec", {}), old_pod.get("spec") or {}, key)
    errors = []
    if _compact(munged) != _compact(old_spec.get("replicatedJobs") or []):
        errors.append(fe.invalid_value("spec.replicatedJobs", fe.go_list(spec.get("replicatedJobs") or [],
                                                                         _REPLICATED_JOB), "field is immutable"))
    if spec.get("managedBy") != old_spec.get("managedBy"):
        errors.append(fe.invalid_value("spec.managedBy", spec.get("managedBy"), "field is immutable"))
    return errors


def _compact(value: Any) -> Any:
    """The value as the typed Go object compares: empty maps and lists the same as absent ones."""
    if isinstance(value, dict):
        kept = {k: _compact(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def _copy_key(target: dict[str, Any], source: dict[str, Any], key: str) -> None:
    if key in source:
        target[key] = copy.deepcopy(source[key])
    else:
        target.pop(key, None)


def validate_jobset(obj: dict[str, Any], old: dict[str, Any] | None, lookup: Lookup) -> list[str]:
    """jobSetWebhook.ValidateCreate / ValidateUpdate: no warnings, or the webhook's 422 denial."""
    errors = _create_errors(obj, lookup) if old is None else _update_errors(obj, old)
    if errors:
        raise fe.denied(VALIDATOR, fe.invalid(QUALIFIED, obj["metadata"]["name"], errors))
    return []


Obj = dict[str, Any]

EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
PRIORITY = "jobset.sigs.k8s.io/priority"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _exclusive(pod: Obj) -> str | None:
    annotations = pod["metadata"].get("annotations") or {}
    if JOBSET_NAME not in annotations or NODE_SELECTOR_STRATEGY in annotations:
        return None
    return annotations.get(EXCLUSIVE)


def _leader(pod: Obj) -> bool:
    return (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX) == "0"


def default_pod(pod: Obj, reader) -> None:
    """The mutating webhook (Default)."""
    meta, spec = pod["metadata"], pod.setdefault("spec", {})
    if JOBSET_NAME not in (meta.get("annotations") or {}):
        return
    if NODE_SELECTOR_STRATEGY in (meta.get("annotations") or {}):
        return
    if spec.get("priority") is not None:
        meta.setdefault("labels", {})[PRIORITY] = str(spec["priority"])
    topology = _exclusive(pod)
    if topology is None:
        return
    labels = meta.get("labels") or {}
    if _leader(pod):
        affinity = spec.setdefault("affinity", {})
        key = labels.get(JOB_KEY, "")
        affinity.setdefault("podAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(
            {"labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [key]}]},
             "topologyKey": topology, "namespaceSelector": {}})
        affinity.setdefault("podAntiAffinity", {}).setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", []).append(
            {"labelSelector": {"matchExpressions": [
                {"key": JOB_KEY, "operator": "Exists"},
                {"key": JOB_KEY, "operator": "NotIn", "values": [key]},
                {"key": PRIORITY, "operator": "In", "values": [labels.get(PRIORITY, "")]}]},
             "topologyKey": topology, "namespaceSelector": {}})
        return
    leader = _leader_of(pod, reader)
    if leader is None or not (leader.get("spec") or {}).get("nodeName"):
        return  # the validating webhook refuses it
    node = reader.find("Node", None, leader["spec"]["nodeName"]) or {"metadata": {}}
    domain = (node["metadata"].get("labels") or {}).get(topology)
    if domain is not None:
        spec.setdefault("nodeSelector", {})[topology] = domain


def validate_pod(pod: Obj, reader) -> None:
    """The validating webhook (ValidateCreate): raises 403 for a follower that must wait."""
    topology = _exclusive(pod)
    if topology is None or _leader(pod):
        return
    if topology not in ((pod.get("spec") or {}).get("nodeSelector") or {}):
        raise denied("vpod.kb.io", "pods", pod["metadata"]["name"], "follower pod node selector for topology domain "
                     f"not found. missing selector: {topology}")
    leader = _leader_of(pod, reader)
    if leader is None or not (leader.get("spec") or {}).get("nodeName"):
        raise denied("vpod.kb.io", "pods", pod["metadata"]["name"], "leader pod not yet scheduled, not creating "
                     "follower pod. this is an expected, transient error")


def _leader_of(pod: Obj, reader) -> Obj | None:
    """The live leader pod of the follower's Job (same owner), or None."""
    labels, meta = pod["metadata"].get("labels") or {}, pod["metadata"]
    name = f"{labels.get(JOBSET_NAME)}-{labels.get(REPLICATED_JOB)}-{labels.get(JOB_INDEX)}-0"
    owner = next((r.get("uid") for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    found = [p for p in reader.list("Pod", meta.get("namespace"))
             if p["metadata"]["name"].rsplit("-", 1)[0] == name and not p["metadata"].get("deletionTimestamp")
             and any(r.get("uid") == owner and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])]
    return found[0] if len(found) == 1 else None
