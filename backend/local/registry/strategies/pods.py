"""The Pod strategy (kubernetes pkg/registry/core/pod/strategy.go), and what this cluster's
kubelet can run.

- create: core/v1 defaults (restartPolicy Always, a 30 s grace period, the default scheduler,
  the DefaultTolerationSeconds plugin's not-ready/unreachable tolerations, their seconds the
  cluster's --default-*-toleration-seconds, container terminationMessage defaults), JobSet's pod
  webhooks (upstream/jobset.py: exclusive placement), status Pending with its QoS class. A pod the embedded kubelet
  could never run is refused (422) rather than left Pending forever: exactly one container, a
  command or args (images are not pulled), and volumes of the kinds it mounts.
- update: the spec is fixed but for images, activeDeadlineSeconds and added tolerations, as
  upstream; spec.nodeName is set once, by the binding subresource (the scheduler's), which also
  marks the pod PodScheduled.
- delete: graceful as upstream: the request's grace, else terminationGracePeriodSeconds; at once
  for a pod not yet bound or already finished. The pod of this cluster's own controller is not
  deletable while it is that process (the one that serves the API).
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import PurePosixPath
from typing import Callable

from backend.local.registry.upstream import jobset
from backend.local.registry.generic import rfc3339
from backend.local.registry.status import ApiError, conflict, forbidden, invalid
from backend.local.registry.strategy import Obj, Reader, Strategy, Webhooks

CONTROLLER_POD_ANNOTATION = "kfcockpit.io/controller-pid"  # on the controller's own pod: not deletable
# A pod's ask to run its command exactly (torchrun) rather than forked warm (node/podspec.py).
WARM_ANNOTATION = "kfcockpit.io/warm-start"
DEFAULT_GRACE = 30
TOLERATION_SECONDS = 300  # the DefaultTolerationSeconds admission plugin's default
NOT_READY, UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
_MOUNTED = ("persistentVolumeClaim", "configMap", "secret", "emptyDir", "projected")
_MUTABLE = ("activeDeadlineSeconds", "tolerations")
_NODE_MEMORY = PurePosixPath("/dev/shm")  # the one hostPath a node offers: its memory (node/memory_area.py)
_IMMUTABLE_MESSAGE = ("Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                      "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                      "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
                      "to 1 if it was previously negative)")


def unrunnable(spec: Obj, path: str = "spec") -> list[tuple[str, str]]:
    """What the embedded kubelet cannot run, as (field, message) for a 422."""
    problems = []
    containers = spec.get("containers") or []
    if len(containers) != 1:
        problems.append((f"{path}.containers", f"Unsupported value: {len(containers)} containers: the embedded "
                                               "cluster runs pods of exactly one container"))
    elif not (containers[0].get("command") or containers[0].get("args")):
        problems.append((f"{path}.containers[0].command", "Required value: images are not pulled here, so the pod "
                                                          "needs a command (or args) to run on this machine"))
    for field in ("initContainers", "ephemeralContainers"):
        if spec.get(field):
            problems.append((f"{path}.{field}", "Unsupported value: not run by the embedded cluster"))
    for i, volume in enumerate(spec.get("volumes") or []):
        if not any(k in volume for k in _MOUNTED) and not _in_node_memory(volume):
            problems.append((f"{path}.volumes[{i}]", "Unsupported value: the embedded cluster mounts "
                                                     "persistentVolumeClaim, configMap, secret, emptyDir and "
                                                     "projected volumes, and hostPath under /dev/shm"))
    return problems


def _in_node_memory(volume: Obj) -> bool:
    """A hostPath volume under /dev/shm: the node's memory, which the kubelet offers."""
    wanted = PurePosixPath(str((volume.get("hostPath") or {}).get("path", "")))
    return "hostPath" in volume and (wanted == _NODE_MEMORY or _NODE_MEMORY in wanted.parents)


def spec_problems(spec: Obj, path: str = "spec") -> list[tuple[str, str]]:
    """What ValidatePodSpec refuses here, for a pod and for a pod template (Jobs, JobSets)."""
    return unrunnable(spec, path) + resource_requirements(spec, path) + escaping_sub_paths(spec, path)


def _overcommit_allowed(resource: str) -> bool:
    """helper.IsOvercommitAllowed: Kubernetes' own resources (cpu, memory, ...), hugepages
    excepted, may be requested below their limit; extended ones (nvidia.com/gpu) may not."""
    native = "/" not in resource or "kubernetes.io/" in resource
    return native and not resource.startswith("hugepages-")


def escaping_sub_paths(spec: Obj, path: str = "spec") -> list[tuple[str, str]]:
    """A volumeMount's subPath stays inside its volume: relative, no '..' element
    (pkg/apis/core/validation validateVolumeMounts -> validateLocalDescendingPath and
    validatePathNoBacksteps); subPath and subPathExpr are mutually exclusive."""
    problems = []
    for i, container in enumerate(spec.get("containers") or []):
        for j, mount in enumerate(container.get("volumeMounts") or []):
            at = f"{path}.containers[{i}].volumeMounts[{j}]"
            sub = mount.get("subPath") or ""
            if sub and mount.get("subPathExpr"):
                problems.append((f"{at}.subPathExpr", f'Invalid value: "{mount["subPathExpr"]}": subPathExpr and '
                                                      "subPath are mutually exclusive"))
            for field in ("subPath", "subPathExpr"):
                value = mount.get(field) or ""
                if value.startswith("/"):
                    problems.append((f"{at}.{field}", f'Invalid value: "{value}": must be a relative path'))
                if ".." in value.split("/"):
                    problems.append((f"{at}.{field}", f"Invalid value: \"{value}\": must not contain '..'"))
    return problems


def resource_requirements(spec: Obj, path: str = "spec") -> list[tuple[str, str]]:
    """Each container's resources as ValidateResourceRequirements checks them (kubernetes
    pkg/apis/core/validation/validation.go): every quantity nonnegative (ValidateNonnegativeQuantity),
    an extended resource's whole (ValidateResourceQuantityValue), a request at most its limit, and
    an extended resource never overcommitted (its limit set and its request equal to it)."""
    from backend.quantity import quantity

    def value(text: object) -> float | None:
        try:
            return quantity(text)  # type: ignore[arg-type]
        except ValueError:
            return None  # a malformed quantity is the schema's to refuse

    def checked(name: str, given: object, at: str) -> list[tuple[str, str]]:
        amount = value(given)
        if amount is None:
            return []
        if amount < 0:
            return [(at, f'Invalid value: "{given}": must be greater than or equal to 0')]
        if not _overcommit_allowed(name) and not amount.is_integer():
            return [(at, f'Invalid value: "{given}": must be an integer')]
        return []

    problems: list[tuple[str, str]] = []
    for i, container in enumerate(spec.get("containers") or []):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        at = f"{path}.containers[{i}].resources"
        for name in sorted(limits):
            problems += checked(name, limits[name], f"{at}.limits[{name}]")
        for name in sorted(requests):
            asked, bound = requests[name], limits.get(name)
            problems += checked(name, asked, f"{at}.requests[{name}]")
            if bound is None:
                if not _overcommit_allowed(name):
                    problems.append((f"{at}.limits", "Required value: Limit must be set for non overcommitable "
                                                     "resources"))
                continue
            if value(asked) is None or value(bound) is None:
                continue
            if value(asked) != value(bound) and not _overcommit_allowed(name):
                problems.append((f"{at}.requests", f'Invalid value: "{asked}": must be equal to {name} limit of '
                                                   f"{bound}"))
            elif value(asked) > value(bound):  # type: ignore[operator]
                problems.append((f"{at}.requests", f'Invalid value: "{asked}": must be less than or equal to '
                                                   f"{name} limit of {bound}"))
    return problems


def default_spec(spec: Obj) -> None:
    """core/v1 defaults of a pod spec (a pod's, or a Job's pod template's)."""
    for key, value in (("restartPolicy", "Always"), ("terminationGracePeriodSeconds", DEFAULT_GRACE),
                       ("schedulerName", "default-scheduler"), ("serviceAccountName", "default"),
                       ("dnsPolicy", "ClusterFirst"), ("enableServiceLinks", True), ("priority", 0)):
        spec.setdefault(key, value)
    for container in spec.get("containers") or []:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = container.get("image") or ""
        container.setdefault("imagePullPolicy", "Always" if image.endswith(":latest") or ":" not in image
                             else "IfNotPresent")
        container.setdefault("resources", {})


def _requests_from_limits(spec: Obj) -> None:
    """SetDefaults_Pod (pkg/apis/core/v1/defaults.go): a limit with no request is requested as
    much; on a Pod only, not on a template."""
    for container in spec.get("containers") or []:
        resources = container.setdefault("resources", {})
        if resources.get("limits"):
            resources["requests"] = {**resources["limits"], **(resources.get("requests") or {})}


def _default_tolerations(spec: Obj, seconds: dict[str, int]) -> None:
    """plugin/pkg/admission/defaulttolerationseconds: a NoExecute toleration of each taint, unless
    one already tolerates it (its key, or no key; NoExecute, or no effect)."""
    tolerations = spec.setdefault("tolerations", [])
    for taint, after in seconds.items():
        if not any(t.get("key") in (taint, None, "") and t.get("effect") in ("NoExecute", None, "")
                   for t in tolerations):
            tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": after})


def qos(spec: Obj) -> str:
    resources = [c.get("resources") or {} for c in spec.get("containers") or []]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(r.get("limits") and (r.get("requests") or r["limits"]) == r["limits"] for r in resources)
    return "Guaranteed" if guaranteed else "Burstable"


def _without_mutable(spec: Obj) -> Obj:
    spec = {k: v for k, v in copy.deepcopy(spec).items() if k not in _MUTABLE}
    for container in spec.get("containers") or []:
        container.pop("image", None)
    return spec


def _jobset_pod_defaults(pod: Obj, old: Obj | None, now: str, reader: Reader) -> None:
    # A webhook sees the pod after the scheme's defaults and the Priority plugin (spec.priority),
    # which kube-apiserver applies before admission; here they are the strategy's (idempotent).
    default_spec(pod.setdefault("spec", {}))
    jobset.default_pod(pod, reader)


def _jobset_pod_validation(pod: Obj, old: Obj | None, reader: Reader) -> list[str]:
    jobset.validate_pod(pod, reader)
    return []


class PodStrategy(Strategy):
    # JobSet's pod webhooks (pkg/webhooks/pod_webhook.go): on create only
    webhooks = Webhooks(mutate=_jobset_pod_defaults, mutate_on=("CREATE",),
                        validate=_jobset_pod_validation, validate_on=("CREATE",))

    def __init__(self, clock: Callable[[], float] = time.time, not_ready_seconds: int = TOLERATION_SECONDS,
                 unreachable_seconds: int = TOLERATION_SECONDS):
        self.clock = clock
        self.toleration_seconds = {NOT_READY: not_ready_seconds, UNREACHABLE: unreachable_seconds}

    def prepare_for_create(self, obj: Obj, reader: Reader) -> None:
        spec = obj.setdefault("spec", {})
        default_spec(spec)
        _requests_from_limits(spec)
        _default_tolerations(spec, self.toleration_seconds)
        obj["status"] = {"phase": "Pending", "qosClass": qos(spec)}

    def validate(self, obj: Obj, reader: Reader) -> list[str]:
        spec = obj["spec"]
        problems = spec_problems(spec)
        if spec.get("restartPolicy") not in ("Always", "OnFailure", "Never"):
            problems.append(("spec.restartPolicy", f"Unsupported value: {spec.get('restartPolicy')!r}: supported "
                                                   'values: "Always", "OnFailure", "Never"'))
        if problems:
            raise invalid("Pod", obj["metadata"]["name"], problems)
        return []

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        spec = obj.setdefault("spec", {})
        default_spec(spec)
        if (old.get("spec") or {}).get("nodeName"):
            spec.setdefault("nodeName", old["spec"]["nodeName"])

    def validate_update(self, obj: Obj, old: Obj, reader: Reader) -> list[str]:
        if _without_mutable(obj["spec"]) != _without_mutable(old.get("spec") or {}):
            raise invalid("Pod", obj["metadata"]["name"], [("spec", _IMMUTABLE_MESSAGE)])
        return []

    def update_subresource(self, subresource: str, body: Obj, old: Obj) -> Obj:
        """pods/binding: the scheduler's decision (registry/core/pod/storage BindingREST)."""
        if subresource != "binding":
            return super().update_subresource(subresource, body, old)
        name = old["metadata"]["name"]
        node = (body.get("target") or {}).get("name")
        if not node:
            raise invalid("Binding", name, [("target.name", "Required value")])
        if old["metadata"].get("deletionTimestamp"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                                            "being deleted, cannot be assigned to a host")
        if (old.get("spec") or {}).get("nodeName"):
            raise conflict("pods/binding", name, f'pod {name} is already assigned to node "{old["spec"]["nodeName"]}"')
        old["spec"]["nodeName"] = node
        status = old.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        status["conditions"] = [{"type": "PodScheduled", "status": "True",
                                 "lastTransitionTime": rfc3339(self.clock())}, *conditions]
        return old

    def before_delete(self, obj: Obj, reader: Reader) -> None:
        if (obj["metadata"].get("annotations") or {}).get(CONTROLLER_POD_ANNOTATION) == str(os.getpid()):
            raise forbidden(f'pods "{obj["metadata"]["name"]}" is forbidden: it is the embedded cluster\'s controller '
                            "process (kfcockpit cluster down stops it)")

    def graceful_delete(self, obj: Obj, grace: int | None) -> int:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0  # nothing runs it, or nothing is left running: it goes at once
        return grace if grace is not None else int(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE))
