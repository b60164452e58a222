"""The embedded API server in-process, for the kube backend's tests: the real aiohttp application
(backend/local/apiserver) over a real store and generic registry (tests/controlplane.py), served in
plain HTTP on 127.0.0.1 by a thread and event loop of its own, so that the real `kubernetes`
client (which blocks, in threads) talks to it as to any cluster, from async and plain tests alike.

No controllers and no kubelets; the embedded cluster's kinds and Services (as other clusters
serve them). A test puts objects straight into the store, as the controllers
would have left them (TrainJobs, JobSets, pods with their statuses: each write one event with a
new resourceVersion), and writes its pods' logs where a kubelet keeps them (node.py), which the
server's pods/log reads. What comes through the API (the backend's own writes) goes through the
generic registry as on the embedded cluster.

What a test breaks: the server's faults (backend/local/apiserver/faults.py: every stream dropped,
watches silenced, a log follow ended early, a bookmark now, 410 as the HTTP status) and the store's
compaction; it waits for a watch to be open or a bookmark sent on a signal. Every request is
recorded (method, path, query, body); `on_write` hooks hear what the API created and deleted (a
test playing a provisioner or a kubelet). Beside the Kubernetes API, the Pipelines API's healthz answers (the
preflight asks it at the same host).

The server's state is its loop's alone: a call from another thread is handed to the loop and
waited for; a call on the loop (a `then` under drop_streams) runs at once.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from aiohttp import web

from backend.local.apiserver.server import ApiServer
from backend.local.registry.client import Client
from backend.local.registry.kinds import KINDS, Kind, Kinds
from backend.local.registry.store import Event
from tests.controlplane import plane
from tests.kube.node import ScriptedNode
from tests.kube.objects import PODMETRICS, PODS

TOKEN = "fake-token"
# What the embedded cluster does not serve and the backend reads where a cluster does: a JobSet's
# headless Service (explain).
SERVICE = Kind("", "v1", "Service", "services", True, ("svc",), ("all",))
HANG_GUARD = 30.0  # seconds: a guard against a hang, not a speed assertion


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any = None
    at: float = field(default_factory=time.monotonic)


class InProcessApi:
    def __init__(self, root: Path) -> None:
        self.requests: list[Request] = []
        # (method, kind, object) of each create and delete through the API, called on the loop
        # before the answer goes: a test playing a provisioner, a kubelet or a controller
        self.on_write: list[Callable[[str, str, dict], None]] = []
        self.healthz_ok = True  # the Pipelines API's healthz
        self._signal = threading.Condition()  # the loop's news for waiting test threads
        self._watching: Counter[str] = Counter()
        self._bookmarks_sent = 0
        self._unserved: dict[str, Kind] = {}
        self._runner: web.AppRunner | None = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="apiserver", daemon=True)
        self.thread.start()
        self.node = ScriptedNode(root / "logs")
        self.port = self._on_loop(self._start)

    async def _start(self) -> int:
        self.client = client = plane(kinds=Kinds([*KINDS, SERVICE]))
        self.store, self.kinds = client.registry.store, client.registry.kinds
        self.server = ApiServer(client.registry, self.node, TOKEN)
        self.server.faults.changed = self._faults_changed
        self.server.app.middlewares.insert(0, self._record)  # outermost: before authentication
        self.store.listeners.append(self._stored)
        self._runner = web.AppRunner(self.server.app, access_log=None, handle_signals=False, shutdown_timeout=0.2)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        await web.SockSite(self._runner, sock).start()
        return sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def rv(self) -> int:
        return self.store.rv

    def stop(self) -> None:
        """The server stops answering (connections refused); idempotent."""
        if self._runner is None:
            return

        async def stop() -> None:
            self.store.close_watches()
            self.node.close_all()
            runner, self._runner = self._runner, None
            await runner.cleanup()

        self._on_loop(stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=HANG_GUARD)
        self.loop.close()

    def write_kubeconfig(self, path: Path, context: str = "fake", namespace: str = "default") -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": TOKEN}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        }))
        return path

    # ------------------------------------------------------------------ objects, as controllers leave them

    def put(self, kind: str, obj: dict, namespace: str = "default") -> dict:
        """Create or replace an object; one event, a new resourceVersion."""
        obj = copy.deepcopy(obj)

        def put() -> dict:
            if kind == PODMETRICS:
                meta = obj["metadata"]
                meta.setdefault("namespace", namespace)
                self.node.pod_metrics[(meta["namespace"], meta["name"])] = obj
                return obj
            found = self.kinds.named(kind)
            meta = obj.setdefault("metadata", {})
            if found.namespaced:
                meta.setdefault("namespace", namespace)
            else:
                meta.pop("namespace", None)
            old = self.store.find(found, meta.get("namespace"), meta["name"])
            return self.store.update(found, obj) if old is not None else self.store.create(found, obj)

        return copy.deepcopy(self._on_loop(put))

    def update(self, kind: str, name: str, change: Callable[[dict], None], namespace: str = "default") -> dict:
        def update() -> dict:
            found = self.kinds.named(kind)
            obj = copy.deepcopy(self.store.get(found, namespace if found.namespaced else None, name))
            change(obj)
            return self.store.update(found, obj)

        return copy.deepcopy(self._on_loop(update))

    def remove(self, kind: str, name: str, namespace: str = "default") -> dict:
        found = self.kinds.named(kind)
        return copy.deepcopy(self._on_loop(lambda: self.store.delete(found, namespace if found.namespaced else None,
                                                                     name)))

    def get(self, kind: str, name: str, namespace: str = "default") -> dict | None:
        found = self.kinds.named(kind)
        return copy.deepcopy(self._on_loop(lambda: self.store.find(found, namespace if found.namespaced else None,
                                                                   name)))

    def names(self, kind: str) -> list[str]:
        found = self.kinds.named(kind)
        return self._on_loop(lambda: [o["metadata"]["name"] for o in self.store.list(found)])

    def through_registry(self, write: Callable[[Client], Any]) -> Any:
        """A write as a controller makes it, through the generic registry and its rules
        (finalizers, graceful deletion), not straight into the store."""
        return self._on_loop(lambda: write(self.client))

    def unserve(self, kind: str) -> None:
        """A cluster without this kind (its CRD not installed, no metrics-server): its paths are 404."""
        def unserve() -> None:
            self._unserved[kind] = next(k for k in self.kinds.kinds if k.kind == kind)
            self.kinds.kinds.remove(self._unserved[kind])

        self._on_loop(unserve)

    def serve(self, kind: str) -> None:
        self._on_loop(lambda: self.kinds.kinds.append(self._unserved.pop(kind)))

    # ------------------------------------------------------------------ pods' logs, as their node keeps them

    def append_log(self, pod: str, *texts: str, namespace: str = "default") -> None:
        self._on_loop(lambda: self.node.append(self._pod(pod, namespace), texts))

    def close_log(self, pod: str, namespace: str = "default") -> None:
        """The container's run ended: followed streams of its log finish."""
        self._on_loop(lambda: self.node.close(self._pod(pod, namespace)))

    def end_with_lines_unsent(self, pod: str, *texts: str, namespace: str = "default") -> None:
        """The container prints its last lines and ends, and its log follows end before they send
        them (a follow the server ended early; the lines are in the log)."""
        def end() -> None:
            self.server.faults.end_log_follows(namespace, pod)
            self.node.append(self._pod(pod, namespace), texts)
            self.node.close(self._pod(pod, namespace))

        self._on_loop(end)

    def restart_container(self, pod: str, namespace: str = "default") -> None:
        """The container restarts in place (restartPolicy OnFailure): its run's log ends, the next
        run's log begins empty and restartCount goes up."""
        def restart() -> None:
            self.node.close(self._pod(pod, namespace))

            def count_up(obj: dict) -> None:
                for container in obj["status"].get("containerStatuses") or []:
                    container["restartCount"] = int(container.get("restartCount") or 0) + 1

            self.update(PODS, pod, count_up, namespace)

        self._on_loop(restart)

    def _pod(self, name: str, namespace: str) -> dict:
        return self.store.get(self.kinds.named(PODS), namespace, name)

    def _stored(self, kind: Kind, event: Event) -> None:
        if kind.kind == PODS and event.type == "DELETED":  # its containers are gone: so are their runs
            self.node.pod_gone(event.object["metadata"]["uid"])

    # ------------------------------------------------------------------ faults

    def drop_streams(self, then: Callable[[], None] | None = None) -> None:
        """Break every open watch and log stream mid-way; `then` runs in the same turn of the
        loop, so a client reconnecting sees its changes, never the state between."""
        def drop() -> None:
            self.server.faults.drop_streams()
            if then is not None:
                then()

        self._on_loop(drop)

    def silence_watches(self) -> None:
        self._on_loop(self.server.faults.silence_watches)

    def bookmark(self) -> None:
        self._on_loop(self.server.faults.bookmark)

    def compact(self) -> None:
        """Forget history: a watch from any version older than the current one gets 410 Gone."""
        self._on_loop(lambda: self.store.compact(self.store.rv))

    def compact_before(self, version: int) -> None:
        self._on_loop(lambda: self.store.compact(version))

    @property
    def gone_as_http_status(self) -> bool:
        return self.server.faults.gone_as_http_status

    @gone_as_http_status.setter
    def gone_as_http_status(self, value: bool) -> None:
        self.server.faults.gone_as_http_status = value

    def wait_watching(self, kind: str = PODS, count: int = 1, timeout: float = HANG_GUARD) -> None:
        """Block until `count` watches of `kind` opened since the last drop or silence are open."""
        with self._signal:
            if not self._signal.wait_for(lambda: self._watching[kind] >= count, timeout):
                raise AssertionError(f"no open watch of {kind} after {timeout}s")

    def wait_bookmarks_sent(self, count: int, timeout: float = HANG_GUARD) -> None:
        with self._signal:
            if not self._signal.wait_for(lambda: self._bookmarks_sent >= count, timeout):
                raise AssertionError(f"fewer than {count} bookmarks sent after {timeout}s")

    def _faults_changed(self) -> None:
        with self._signal:
            self._watching = self.server.faults.watching()
            self._bookmarks_sent = self.server.faults.bookmarks_sent
            self._signal.notify_all()

    # ------------------------------------------------------------------ requests

    def requests_for(self, method: str, path_part: str, watch: bool | None = None) -> list[Request]:
        found = [r for r in list(self.requests) if r.method == method and path_part in r.path]
        if watch is not None:
            found = [r for r in found if (r.query.get("watch", "").lower() in ("true", "1")) == watch]
        return found

    @web.middleware
    async def _record(self, request: web.Request, handler) -> web.StreamResponse:
        body = None
        if request.method in ("POST", "PUT", "PATCH", "DELETE") and request.can_read_body:
            raw = await request.read()  # kept: the verbs read it again
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw
        self.requests.append(Request(request.method, request.path, dict(request.query), body))
        if request.path == "/apis/v2beta1/healthz":  # the Pipelines API's, not Kubernetes'
            return web.json_response({"multi_user": False} if self.healthz_ok else {"error": "unavailable"},
                                     status=200 if self.healthz_ok else 503)
        response = await handler(request)
        if request.method in ("POST", "DELETE") and response.status in (200, 201, 202) \
                and isinstance(response, web.Response):
            written = json.loads(response.body)
            for hook in list(self.on_write):
                hook(request.method, written.get("kind", ""), written)
        return response

    def _on_loop(self, call: Callable[[], Any]) -> Any:
        if threading.current_thread() is self.thread:
            return call()

        async def run() -> Any:
            result = call()
            return await result if inspect.isawaitable(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(HANG_GUARD)
