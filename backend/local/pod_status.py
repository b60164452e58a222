"""A pod object as its kubelet keeps it in the API: a bare pod's status and events as
barepods.py reports them, and deletion as the kubelet does it (grace 0 kills at once; otherwise
the pod is Terminating while its process gets SIGTERM, then SIGKILL, and goes when it ended).
"""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING, Any

from backend.local import objects
from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError

if TYPE_CHECKING:
    from backend.local import barepods
    from backend.local.api import ClusterApi


def unschedulable(api: ClusterApi, namespace: str, name: str, why: str) -> None:
    """A bare pod the scheduler cannot place yet: Pending, PodScheduled False, FailedScheduling."""
    kind = api.kinds["Pod"]
    live = api.store.find(kind, namespace, name)
    if live is None:
        return
    status = {**(live.get("status") or {}), "phase": "Pending",
              "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                              "message": why, "lastTransitionTime": objects.rfc3339(time.time())}]}
    api.store.update(kind, {**live, "status": status})
    api.mirror.event(live, "Warning", "FailedScheduling", why, "default-scheduler")


def report(api: ClusterApi, namespace: str, name: str, phase: str, container: dict[str, Any],
           reason: str = "") -> None:
    """A bare pod's status as its kubelet (barepods.py) sees it."""
    kind = api.kinds["Pod"]
    live = api.store.find(kind, namespace, name)
    if live is None:
        return
    running = "running" in container["state"]
    now = objects.rfc3339(time.time())
    status = {**(live.get("status") or {}), "phase": phase, "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
              "podIPs": [{"ip": "127.0.0.1"}], "containerStatuses": [container],
              "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                             {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                             {"type": "ContainersReady", "status": str(running), "lastTransitionTime": now},
                             {"type": "Ready", "status": str(running), "lastTransitionTime": now}]}
    status.setdefault("startTime", now)
    if reason:
        status["reason"] = reason
    first_bind = not (live.get("spec") or {}).get("nodeName")
    api.store.update(kind, {**live, "spec": {**live["spec"], "nodeName": socket.gethostname()},
                            "status": status})
    if first_bind:
        api.mirror.event(live, "Normal", "Scheduled", f"Successfully assigned {namespace}/{name} to "
                                                      f"{socket.gethostname()}", "default-scheduler")
    if running:
        api.mirror.event(live, "Normal", "Started", "Started container (a process on this machine)", "kubelet")
    elif "waiting" in container["state"]:
        api.mirror.event(live, "Warning", container["state"]["waiting"]["reason"],
                         container["state"]["waiting"].get("message", ""), "kubelet")


def gone(api: ClusterApi, namespace: str, name: str) -> None:
    """Its process has ended after a delete: the object (and the kubelet's record) go now."""
    kind = api.kinds["Pod"]
    if api.store.find(kind, namespace, name) is not None:
        api.store.delete(kind, namespace, name)
    api.ctl.forget_bare_pod(f"{namespace}.{name}")


def _delete_bare_pod(api: ClusterApi, kind: Kind, obj: dict[str, Any], grace: int,
                     pod: "barepods.BarePod") -> dict[str, Any] | None:
    pod.terminate(max(grace, 0))
    if grace <= 0 or not pod.running():
        api.ctl.forget_bare_pod(pod.key)
        return None
    pod.task.add_done_callback(lambda _t: gone(api, pod.namespace, pod.name))
    return _terminating(api, kind, obj, grace)


def _terminating(api: ClusterApi, kind: Kind, obj: dict[str, Any], grace: int) -> dict[str, Any]:
    """The pod as it shows while its process gets its grace period (kubectl: Terminating)."""
    meta = {**obj["metadata"], "deletionGracePeriodSeconds": grace,
            "deletionTimestamp": objects.rfc3339(time.time() + grace)}
    api.mirror.event(obj, "Normal", "Killing", "Stopping container", "kubelet")
    return api.store.update(kind, {**obj, "metadata": meta})


def delete(api: ClusterApi, kind: Kind, obj: dict[str, Any], grace: int | None) -> dict[str, Any] | None:
    """As the kubelet: grace 0 (`--force`) kills at once and the object goes; otherwise the
    pod is Terminating (deletionTimestamp) while it gets SIGTERM, SIGKILL after the grace
    period, and the object goes when its process has ended. Either way its group restarts."""
    name = obj["metadata"]["name"]
    if name == api.controller_pod and obj["metadata"].get("namespace") == objects.TRAINER_NAMESPACE:
        raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: it is the embedded cluster\'s controller '
                                         "process (kfcockpit cluster down stops it)")
    if grace is None:
        grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
    bare = api.ctl.bare_pods.get(f"{obj['metadata']['namespace']}.{name}")
    if bare is not None:
        return _delete_bare_pod(api, kind, obj, grace, bare)
    api.mirror.deleted_pods.add(name)
    if api.ctl.pod_finished(name):
        return None
    if grace <= 0:
        api.ctl.kill_pod(name)
        return None
    if not api.ctl.terminate_pod(name, grace):
        return None
    return _terminating(api, kind, obj, grace)
