"""The strategies of Kubeflow Trainer v2.3's kinds: TrainJob, TrainingRuntime,
ClusterTrainingRuntime. Their CRDs' defaults and rules are upstream's (crds/, which the generic
registry runs first), and so are the Trainer's webhooks, which each row registers (upstream/
trainer.py); then the cockpit's models for the shapes they check (admission.check_model).

A TrainJob also answers what the embedded cluster knows at once: its pods' names must fit
(`<job>-node-0-<index>-<5 chars>` in 63 characters), and no node count beyond every node's pod
slots together. Its spec changes only in `suspend` while it runs; while suspended it may change
(the Trainer builds the JobSet again when it resumes).
"""

from __future__ import annotations

from typing import Callable

from backend.local.registry import admission
from backend.local.registry.kinds import Kind
from backend.local.registry.status import invalid
from backend.local.registry.strategy import Obj, Reader, Strategy, Webhooks
from backend.local.registry.upstream import trainer
from backend.quantity import quantity
from backend.words import count

MAX_NAME = 63


def pod_name_length(job: str) -> int:
    """The length of the longest pod name of a TrainJob's first replicated job (JobSet names a pod
    `<jobset>-<replicated job>-<job index>-<completion index>-<5 chars>`)."""
    return len(f"{job}-node-0-0-xxxxx")


def pod_slots(reader: Reader) -> int:
    """Pods every node can hold together (their allocatable pods)."""
    return sum(int(quantity(((n.get("status") or {}).get("allocatable") or {}).get("pods") or 0))
               for n in reader.list("Node"))


class TrainJobStrategy(Strategy):
    # pkg/webhooks/trainjob_webhook.go: the defaulter and the validator, on create and update
    webhooks = Webhooks(mutate=lambda obj, old, now, reader: trainer.default_trainjob(obj, old, now),
                        validate=lambda obj, old, reader: trainer.validate_trainjob(obj, old, reader.find))

    def __init__(self, kind: Kind):
        self.kind = kind

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        return self._validate(obj, reader)

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        admission.immutable_spec(self.kind, obj, old)
        return self._validate(obj, reader)

    def _validate(self, obj: Obj, reader: Reader) -> list[str]:
        admission.check_model(self.kind, obj)
        name = obj["metadata"]["name"]
        trainer = (obj.get("spec") or {}).get("trainer") or {}
        causes = []
        if pod_name_length(name) > MAX_NAME:
            causes.append(("metadata.name", f"Invalid value: \"{name}\": its pod names (`{name}-node-0-0-xxxxx`) would "
                           f"exceed {MAX_NAME} characters; use at most "
                           f"{len(name) - (pod_name_length(name) - MAX_NAME)}"))
        nodes, slots = trainer.get("numNodes"), pod_slots(reader)
        if isinstance(nodes, int) and slots and nodes > slots:
            # Not an upstream rule: a cluster would keep such pods Pending; one machine cannot hold
            # that many Pending pods either, so the embedded cluster says so at once.
            causes.append(("spec.trainer.numNodes", f"Invalid value: {nodes}: the embedded cluster's nodes hold "
                                                    f"{count(slots, 'pod')} together (the kubelet's maxPods), "
                                                    f"so at most {count(slots, 'node')} can ever be scheduled; "
                                                    "use a real cluster for more"))
        if causes:
            raise invalid(self.kind.kind, name, causes, self.kind.group)
        return []


class RuntimeStrategy(Strategy):
    """TrainingRuntime and ClusterTrainingRuntime: the shapes the models check."""

    def __init__(self, kind: Kind, validator: Callable[[Obj, Obj | None], list[str]]):
        self.kind = kind
        # pkg/webhooks/{,cluster}trainingruntime_webhook.go: a validator each, no defaulter
        self.webhooks = Webhooks(validate=lambda obj, old, reader: validator(obj, old))

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        admission.check_model(self.kind, obj)
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        return self.validate(obj, reader)
