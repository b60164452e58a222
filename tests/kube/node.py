"""A node without a kubelet, for the in-process API server (apiserver.py): what the API server asks
of the nodes (backend/local/apiserver/streams.Nodes), with the pods' logs written by the test.

A pod's log is where the kubelet keeps it (backend/local/node/logs.py: one file per container
run, `<root>/<namespace>/<pod>_<uid>/<container>/<restart>.log`) and is read by the kubelet's own
`follow`, so pods/log answers as on the embedded cluster: plain or followed until the run's log
is closed, `timestamps`, `tailLines`, `sinceSeconds`, `previous`. PodMetrics are what the test set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

from backend.local.node.logs import PodLog, follow, log_path
from backend.local.registry.kinds import Kind
from backend.local.registry.status import bad_request


class ScriptedNode:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs: dict[tuple[str, str, int], PodLog] = {}  # (pod uid, container, restart) -> its log
        self.pod_metrics: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> PodMetrics

    # ------------------------------------------------------------------ what a test does (on the loop)

    def append(self, pod: dict[str, Any], texts: tuple[str, ...]) -> None:
        self.log(pod).write([text.encode() for text in texts])

    def close(self, pod: dict[str, Any]) -> None:
        """The container's run ended: its followers read to the end and finish."""
        self.log(pod).close()

    def log(self, pod: dict[str, Any], container: str = "") -> PodLog:
        """The log of a container's current run (its restartCount); the pod's first container's
        unless named."""
        meta, container = pod["metadata"], container or _containers(pod)[0]
        restart = _restart(pod)
        key = (meta["uid"], container, restart)
        if key not in self.runs:
            self.runs[key] = PodLog(log_path(self.root, meta["namespace"], meta["name"], meta["uid"], container,
                                             restart))
        return self.runs[key]

    def pod_gone(self, uid: str) -> None:
        """The pod was deleted: its containers' runs are over."""
        for (pod_uid, _, _), log in self.runs.items():
            if pod_uid == uid:
                log.close()

    def close_all(self) -> None:
        for log in self.runs.values():
            log.close()

    # ------------------------------------------------------------------ what the API server asks

    async def pod_log(self, pod: dict[str, Any], options: dict[str, str]) -> AsyncIterator[bytes]:
        """pods/log as the kubelet answers it (pkg/kubelet/kubelet_pods.go validateContainerLogStatus:
        400 for a container that is not the pod's, or that is waiting to start)."""
        meta, names = pod["metadata"], _containers(pod)
        container = options.get("container") or names[0]
        if container not in names:
            raise bad_request(f"container {container} is not valid for pod {meta['name']}")
        state = next((s.get("state") or {} for s in (pod.get("status") or {}).get("containerStatuses") or []
                      if s.get("name") == container), {})
        if not state.get("running") and not state.get("terminated"):
            reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
            raise bad_request(f'container "{container}" in pod "{meta["name"]}" is waiting to start: {reason}')
        previous = options.get("previous") in ("1", "true", "True")
        restart = _restart(pod) - previous
        live = self.runs.get((meta["uid"], container, restart))
        if live is None and not previous and state.get("running"):
            live = self.log(pod, container)  # a running container's log is open from its start
        path = log_path(self.root, meta["namespace"], meta["name"], meta["uid"], container, restart)
        async for chunk in follow(path, live, options):
            yield chunk

    def metrics(self, kind: Kind, namespace: str | None) -> list[dict[str, Any]]:
        if kind.kind != "PodMetrics":
            return []
        return [m for (ns, _), m in sorted(self.pod_metrics.items()) if namespace is None or ns == namespace]


def _containers(pod: dict[str, Any]) -> list[str]:
    return [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]


def _restart(pod: dict[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return int(statuses[0].get("restartCount") or 0)
