"""The strategies of the core kinds that are not pods: Namespace, ConfigMap, Secret, Node.

- Namespace (pkg/registry/core/namespace): created Active with the `kubernetes` finalizer and
  the kubernetes.io/metadata.name label; its name an RFC 1123 label; spec.finalizers change only
  through /finalize. A delete leaves it Terminating until the namespace controller has emptied
  it and removed that finalizer. The namespaces a cluster cannot lose are refused as the
  NamespaceLifecycle plugin refuses them, and kubeflow-system, which holds this cluster's own
  controller.
- ConfigMap and Secret: their data hold at most 1 MiB (core.MaxSecretSize), counted as
  ValidateConfigMap and ValidateSecret count it (a value's bytes, binaryData's and a Secret's
  data decoded). Secret: stringData is write-only, merged into data; type defaults to Opaque,
  then is fixed.
- Event: its name is not checked (core/v1 ValidateEventCreate).
- Node: its kubelet registers it with its status (capacity, conditions) already set.
"""

from __future__ import annotations

import base64

from backend.local.registry import fielderrors as fe
from backend.local.registry.names import dns1123_label
from backend.local.registry.status import forbidden, invalid
from backend.local.registry.strategy import Obj, Reader, Strategy

# NamespaceLifecycle's immortal namespaces, and the one this cluster's controller lives in.
UNDELETABLE = ("default", "kube-system", "kube-public")
TRAINER_NAMESPACE = "kubeflow-system"
NAMESPACE_FINALIZER = "kubernetes"


class NamespaceStrategy(Strategy):
    name_problems = staticmethod(dns1123_label)  # ValidateNamespaceName

    def prepare_for_create(self, obj: Obj, reader: Reader) -> None:
        spec = obj.setdefault("spec", {})
        if NAMESPACE_FINALIZER not in (spec.get("finalizers") or []):
            spec["finalizers"] = [*(spec.get("finalizers") or []), NAMESPACE_FINALIZER]
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        obj.setdefault("spec", {})["finalizers"] = list((old.get("spec") or {}).get("finalizers") or [])
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]

    def before_delete(self, obj: Obj, reader: Reader) -> None:
        name = obj["metadata"]["name"]
        if name in UNDELETABLE:
            raise forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        if name == TRAINER_NAMESPACE:
            raise forbidden(f'namespaces "{name}" is forbidden: it holds the embedded cluster\'s own controller '
                            "(kfcockpit cluster down stops it)")

    def deleting(self, obj: Obj) -> None:
        obj.setdefault("status", {})["phase"] = "Terminating"

    def removable(self, obj: Obj) -> bool:
        return not (obj.get("spec") or {}).get("finalizers")


MAX_DATA_SIZE = 1024 * 1024  # pkg/apis/core/types.go MaxSecretSize, a ConfigMap's limit too


def _decoded_size(values: dict) -> int:
    try:
        return sum(len(base64.b64decode(v)) for v in values.values())
    except (ValueError, TypeError):
        return sum(len(str(v)) for v in values.values())  # not base64: the schema's to refuse


class ConfigMapStrategy(Strategy):
    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        """ValidateConfigMap: data's and binaryData's values together, the whole object's error
        (field.NewPath(""), which field.Path.String() writes "[]")."""
        size = sum(len(str(v).encode()) for v in (obj.get("data") or {}).values()) + \
            _decoded_size(obj.get("binaryData") or {})
        if size > MAX_DATA_SIZE:
            raise fe.invalid("ConfigMap", obj["metadata"]["name"], [fe.too_long("[]", MAX_DATA_SIZE)])
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        return self.validate(obj, reader)  # ValidateConfigMapUpdate validates the new object whole


class SecretStrategy(Strategy):
    def prepare_for_create(self, obj: Obj, reader: Reader) -> None:
        obj["type"] = obj.get("type") or "Opaque"
        self._merge_string_data(obj)

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        obj["type"] = obj.get("type") or old.get("type") or "Opaque"
        self._merge_string_data(obj)

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        if _decoded_size(obj.get("data") or {}) > MAX_DATA_SIZE:  # ValidateSecret
            raise fe.invalid("Secret", obj["metadata"]["name"], [fe.too_long("data", MAX_DATA_SIZE)])
        return []

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        if obj["type"] != old.get("type", "Opaque"):
            raise invalid("Secret", obj["metadata"]["name"], [("type", "Invalid value: field is immutable")])
        return self.validate(obj, reader)

    @staticmethod
    def _merge_string_data(obj: Obj) -> None:
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(str(value).encode()).decode()


class EventStrategy(Strategy):
    # ValidateEventCreate: a core/v1 Event passes the legacy checks only ("no further validation
    # for backwards compatibility"), not ValidateObjectMeta's name rule, so the recorder's
    # `<object name>.<hex time>` of an object named 253 characters long is taken.
    name_problems = staticmethod(lambda _name: [])


class NodeStrategy(Strategy):
    keep_status_on_create = True
