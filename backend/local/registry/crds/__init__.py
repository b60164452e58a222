"""Upstream admission for the custom resources the embedded cluster serves, as a real cluster
with Kubeflow Trainer v2.3.0, JobSet v0.12.0, KubeRay v1.7.0 and external-snapshotter v8.6.0
judges them: their CRDs' schemas (vendored in data/, refreshed by refresh.py), CEL rules and
webhooks. Pure functions over JSON objects; what they need from the cluster comes in through a
`Lookup` (kind, namespace, name → stored object or None).

Entry points:
    admit(kind, operation, obj, old, lookup) -> warnings   the whole admission of a write, in
        kube-apiserver's order (below); `obj` is defaulted in place; raises ApiError: 422 Invalid
        (schema, list types, CEL), or a webhook's denial (403, or 422 for JobSet's).
    unknown_fields(kind, obj) -> paths | None     what fieldValidation judges (None: no CRD)
    schema(kind) -> openAPIV3Schema | None        what `kubectl explain` shows (openapi.py)
    default_jobset(obj)                           JobSet's defaulting webhook, for the JobSets
                                                  a controller creates
    num_proc_per_node(trainjob, runtime) -> str   PET_NPROC_PER_NODE as Trainer's torch plugin sets it
    procs_per_node(trainjob, runtime) -> int      the same with "auto" resolved (one per GPU)
    node_pod_spec(trainjob, runtime) -> dict      the trainer pod's spec in the JobSet the Trainer
                                                  builds: runtime template, patches, JobSet defaults
    validate_rayjob(obj) -> (reason, message)|None  the KubeRay operator's validation (a status
                                                  and an event, not a refusal: no webhook upstream)

The order of `admit`: the body pruned of undeclared fields (fieldValidation has judged them
already) and non-nullable nulls, structural defaults; the mutating webhook (TrainJob's
runtimePatches times, JobSet's defaults on create); status dropped on create (the status
subresource owns it); the schema, list-type and CEL validation (CEL skipped, with upstream's
note, when a blocking error such as a wrong type or a missing required field came first); then
the validating webhooks (Trainer's TrainJob and runtime validators, JobSet's).
"""

from __future__ import annotations

import copy
import time
from typing import Any

from backend.local.registry.crds import catalog, jobset, listtype, openapi_schema, structural, trainer
from backend.local.registry.crds import fielderrors as fe
from backend.local.registry.crds import validation_rules
from backend.local.registry.crds.kuberay import validate_rayjob
from backend.local.registry.crds.trainer_plugins import Lookup, gpus_per_node, resources_per_node
from backend.local.registry.crds.trainer_plugins import num_proc_per_node as _num_proc_per_node

KINDS = catalog.kinds()
default_jobset = jobset.default_jobset
_BLOCKING = {fe.NOT_SUPPORTED, fe.REQUIRED, fe.TOO_LONG, fe.TOO_MANY, fe.TYPE_INVALID}
_UNCHECKED = fe.invalid_value(None, None, "some validation rules were not checked because the object was invalid; "
                                          "correct the existing errors to complete validation")

__all__ = ["KINDS", "Lookup", "admit", "default_jobset", "node_pod_spec", "num_proc_per_node", "procs_per_node",
           "schema", "unknown_fields", "validate_rayjob"]


def schema(kind: str) -> dict[str, Any] | None:
    found = catalog.crd(kind)
    return found.schema if found else None


def unknown_fields(kind: str, obj: dict[str, Any]) -> list[str] | None:
    """The paths pruning would drop from `obj` (sorted), or None for a kind without a CRD."""
    found = catalog.crd(kind)
    return None if found is None else structural.prune(copy.deepcopy(obj), found.schema)


def num_proc_per_node(trainjob: dict[str, Any], runtime: dict[str, Any]) -> str:
    return _num_proc_per_node(trainer.merged_runtime_spec(runtime, trainjob), trainjob)


def procs_per_node(trainjob: dict[str, Any], runtime: dict[str, Any]) -> int:
    """Processes torchrun starts per node: numProcPerNode, its "auto" being the GPU count."""
    value = num_proc_per_node(trainjob, runtime)
    if value != "auto":
        return int(value)
    return gpus_per_node(resources_per_node(trainer.merged_runtime_spec(runtime, trainjob), trainjob))


def node_pod_spec(trainjob: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """The `node` replicated job's pod spec, as the JobSet the Trainer creates holds it (after
    JobSet's defaulting webhook: restartPolicy OnFailure where the template leaves it empty)."""
    jobset_obj = {"spec": trainer.merged_runtime_spec(runtime, trainjob)}
    jobset.default_jobset(jobset_obj)
    for rjob in jobset_obj["spec"].get("replicatedJobs") or []:
        if rjob.get("name") == "node":
            return rjob["template"]["spec"]["template"]["spec"]
    return {}


def admit_status(kind: str, obj: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """A write to a custom resource's status subresource, as the API server's customresource
    status strategy takes it: pruned and defaulted, then the whole object validated against the
    schema and its CEL rules (no webhook: their rules name the resource, not its /status)."""
    crd = catalog.crd(kind)
    if crd is None:
        return []
    old = copy.deepcopy(old)
    _normalize(old, crd.schema)
    _normalize(obj, crd.schema)
    return _validate(crd, obj, old)


def _normalize(obj: dict[str, Any], schema: dict[str, Any]) -> None:
    structural.prune(obj, schema)
    structural.drop_nulls(obj, schema)
    structural.default(obj, schema)


def _validate(crd: catalog.Crd, obj: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    errors = openapi_schema.validate(obj, crd.schema, old)
    if old is None or not listtype.validate(old, crd.schema):
        errors += listtype.validate(obj, crd.schema)
    warnings: list[str] = []
    if any(e.type in _BLOCKING for e in errors):
        errors.append(_UNCHECKED)
    else:
        rule_errors, warnings = validation_rules.validate(obj, crd.schema, old)
        errors += rule_errors
    if errors:
        raise fe.invalid(crd.qualified_kind, obj["metadata"]["name"], errors)
    return warnings


def admit(kind: str, operation: str, obj: dict[str, Any], old: dict[str, Any] | None, lookup: Lookup,
          now: str | None = None) -> list[str]:
    """Admit a CREATE or UPDATE of a custom resource as upstream does (see the module's doc)."""
    crd = catalog.crd(kind)
    if crd is None:
        return []
    now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if old is not None:  # the API server defaults what it reads from storage too (stored before a default existed)
        old = copy.deepcopy(old)
        _normalize(old, crd.schema)
    _normalize(obj, crd.schema)
    if kind == "TrainJob":
        trainer.default_trainjob(obj, old, now)
    elif kind == "JobSet" and operation == "CREATE":
        jobset.default_jobset(obj)
    _normalize(obj, crd.schema)  # a mutating webhook's result is pruned and defaulted again
    if operation == "CREATE" and "status" in crd.subresources:
        obj.pop("status", None)
    warnings = _validate(crd, obj, old)
    if kind in ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"):
        warnings += trainer.check(kind, obj, old, lookup)
    elif kind == "JobSet":
        warnings += jobset.validate_jobset(obj, old, lookup)
    return warnings
