"""The strategies of batch/v1 Job (kubernetes pkg/registry/batch/job/strategy.go) and JobSet
(jobset v0.12 pkg/webhooks/jobset_webhook.go and its CRD's defaults).

- Job: parallelism and completions 1 unless given, backoffLimit 6, NonIndexed, not suspended;
  the selector and the template's labels name the Job by its uid
  (batch.kubernetes.io/controller-uid) and name, as generateSelector does. The pod template
  must be one the kubelet runs, with restartPolicy Never or OnFailure; an Indexed Job needs
  completions. Its template, selector and completion mode are fixed once created. batch/v1's
  default propagation is Orphan, for backward compatibility, as upstream: clients say what they
  want (kubectl says Background).
- JobSet: its defaults and webhook are upstream's (crds/, upstream/jobset.py: successPolicy All,
  Indexed jobs whose pods restart OnFailure, DNS hostnames on...). Only `suspend` changes while it runs; anything
  may change while it is suspended (a TrainJob resumed with new settings).
"""

from __future__ import annotations

from backend.local.registry.status import invalid
from backend.local.registry.strategies.pods import default_spec, spec_problems
from backend.local.registry.strategy import ORPHAN, Obj, Reader, Strategy, Webhooks
from backend.local.registry.upstream import jobset

JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOBSET_GROUP = "jobset.x-k8s.io"


def _job_labels(name: str, uid: str) -> dict[str, str]:
    return {JOB_UID_LABEL: uid, JOB_NAME_LABEL: name, "controller-uid": uid, "job-name": name}


class JobStrategy(Strategy):
    default_propagation = ORPHAN

    def prepare_for_create(self, obj: Obj, reader: Reader) -> None:
        meta, spec = obj["metadata"], obj.setdefault("spec", {})
        if "parallelism" not in spec and "completions" not in spec:
            spec["parallelism"] = spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        for key, value in (("backoffLimit", 6), ("completionMode", "NonIndexed"), ("suspend", False),
                           ("manualSelector", False), ("podReplacementPolicy", "TerminatingOrFailed")):
            spec.setdefault(key, value)
        labels = _job_labels(meta["name"], meta["uid"])
        spec["selector"] = {"matchLabels": {JOB_UID_LABEL: meta["uid"]}}
        template = spec.setdefault("template", {})
        template.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
        meta.setdefault("labels", {}).update({k: v for k, v in labels.items() if "uid" not in k})
        default_spec(template.setdefault("spec", {}))

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        spec = obj["spec"]
        problems = spec_problems(spec["template"]["spec"], "spec.template.spec")  # ValidatePodTemplateSpec
        policy = spec["template"]["spec"].get("restartPolicy")
        if policy not in ("OnFailure", "Never"):
            problems.append(("spec.template.spec.restartPolicy", f'Unsupported value: "{policy}": supported values: '
                                                                 '"OnFailure", "Never"'))
        if spec["completionMode"] == "Indexed" and spec.get("completions") is None:
            problems.append(("spec.completions", "Required value: when completion mode is Indexed"))
        if spec["completionMode"] not in ("Indexed", "NonIndexed"):
            problems.append(("spec.completionMode", f'Unsupported value: "{spec["completionMode"]}"'))
        for field in ("parallelism", "completions", "backoffLimit"):
            if spec.get(field) is not None and (not isinstance(spec[field], int) or spec[field] < 0):
                problems.append((f"spec.{field}", f"Invalid value: {spec[field]!r}: must be greater than or equal "
                                                  "to 0"))
        if problems:
            raise invalid("Job", obj["metadata"]["name"], problems, "batch")
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        problems = [(f"spec.{field}", "Invalid value: field is immutable")
                    for field in ("template", "selector", "completionMode", "completions")
                    if obj["spec"].get(field) != (old.get("spec") or {}).get(field)]
        if problems:
            raise invalid("Job", obj["metadata"]["name"], problems, "batch")
        return []


class JobSetStrategy(Strategy):
    """Its defaults and rules are its CRD's (crds/) and its webhooks' (upstream/jobset.py); the
    pods its Jobs make must be ones the kubelet runs."""

    # pkg/webhooks/jobset_webhook.go: mjobset.kb.io defaults on create; vjobset.kb.io validates
    webhooks = Webhooks(mutate=lambda obj, old, now, reader: jobset.default_jobset(obj), mutate_on=("CREATE",),
                        validate=lambda obj, old, reader: jobset.validate_jobset(obj, old, reader.find))

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        problems = []
        rjobs = obj["spec"].get("replicatedJobs") or []
        if not rjobs:
            problems.append(("spec.replicatedJobs", "Required value"))
        for i, rjob in enumerate(rjobs):
            if not rjob.get("name"):
                problems.append((f"spec.replicatedJobs[{i}].name", "Required value"))
            pod_spec = rjob["template"]["spec"]["template"]["spec"]
            at = f"spec.replicatedJobs[{i}].template.spec.template.spec"
            problems += spec_problems(pod_spec, at)
        if problems:
            raise invalid("JobSet", obj["metadata"]["name"], problems, JOBSET_GROUP)
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        old_spec = old.get("spec") or {}
        if old_spec.get("suspend"):
            return self.validate(obj, reader)

        def running(spec: Obj) -> Obj:
            return {k: v for k, v in spec.items() if k != "suspend"}

        if running(obj["spec"]) != running(old_spec):
            raise invalid("JobSet", obj["metadata"]["name"],
                          [("spec", "Invalid value: field is immutable (only spec.suspend changes while the JobSet "
                                    "is not suspended)")], JOBSET_GROUP)
        return []
