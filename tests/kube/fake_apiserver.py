"""A fake Kubernetes API server: a real HTTP/1.1 server on 127.0.0.1 that speaks the wire
protocol the `kubernetes` Python client uses, so the kube backend runs unmodified against it.

What it serves, as the real API server does:
- lists with a resourceVersion; label selectors (=, ==, !=, exists, !exists) and field selectors
  (metadata.name, metadata.namespace);
- watches: a chunked stream of JSON events from a resourceVersion, BOOKMARK events when the
  client allows them, 410 Gone for a version older than the last compaction (as an ERROR event,
  or as the HTTP status), the server-side timeout;
- create (409 AlreadyExists), get, JSON merge patch, delete (grace period recorded);
- pod logs, plain or followed (chunked, `timestamps=true`), 400 while a container has not started;
- API discovery of a group/version, /version, and the Pipelines healthz path.

What tests can do to it: change objects (each change is an event with a new resourceVersion),
append to and close pod logs, drop every open stream mid-way, make open watches go silent,
compact history (so old versions are Gone), send bookmarks, and hook object creation (to play
kubelet or a controller). Every request is recorded.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from backend.local.apiserver.patch import merge_patch  # RFC 7386, as the embedded API server applies it

# (api prefix, plural) -> (kind, namespaced)
SERVED = {
    ("api/v1", "pods"): ("Pod", True),
    ("api/v1", "persistentvolumeclaims"): ("PersistentVolumeClaim", True),
    ("apis/trainer.kubeflow.org/v1alpha1", "trainjobs"): ("TrainJob", True),
    ("apis/trainer.kubeflow.org/v1alpha1", "trainingruntimes"): ("TrainingRuntime", True),
    ("apis/trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes"): ("ClusterTrainingRuntime", False),
    ("apis/jobset.x-k8s.io/v1alpha2", "jobsets"): ("JobSet", True),
    ("apis/ray.io/v1", "rayjobs"): ("RayJob", True),
    ("apis/snapshot.storage.k8s.io/v1", "volumesnapshots"): ("VolumeSnapshot", True),
    ("apis/snapshot.storage.k8s.io/v1", "volumesnapshotclasses"): ("VolumeSnapshotClass", False),
    ("apis/snapshot.storage.k8s.io/v1", "volumesnapshotcontents"): ("VolumeSnapshotContent", False),
    ("apis/storage.k8s.io/v1", "storageclasses"): ("StorageClass", False),
    ("apis/metrics.k8s.io/v1beta1", "pods"): ("PodMetrics", True),  # metrics-server: tests only list it
}

PODS = ("api/v1", "pods")

TOKEN = "fake-token"


def now_rfc3339(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _labels_match(selector: str, labels: dict) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _fields_match(selector: str, obj: dict) -> bool:
    meta = obj.get("metadata") or {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, _, value = term.replace("==", "=").partition("=")
        if key == "metadata.name" and meta.get("name") != value:
            return False
        if key == "metadata.namespace" and meta.get("namespace") != value:
            return False
    return True


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class _Log:
    lines: list[tuple[str, str]] = field(default_factory=list)  # (timestamp, text)
    closed: bool = False


def _status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    return body


class FakeApiServer:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rv = 1000
        self.objects: dict[tuple[str, str], dict[tuple[str, str], dict]] = {key: {} for key in SERVED}
        self.served = set(SERVED)
        self.history: list[tuple[int, tuple[str, str], str, dict]] = []
        self.compacted = 0  # a watch from a version below this is Gone
        self.gone_as_http_status = False  # 410 as the HTTP status instead of an ERROR event
        self.generation = 0  # drop_streams() bumps it: open streams break mid-way
        self.silenced = 0  # silence_watches() sets it to the generation: those watches stop talking
        self.bookmarks = 0
        self.stopping = False
        self.logs: dict[tuple[str, str], _Log] = {}
        self.requests: list[Request] = []
        self.on_create: list[Callable[[tuple[str, str], dict], None]] = []
        self.healthz_ok = True
        self.streaming: list[tuple[tuple[str, str], int]] = []  # open watch streams: (key, generation)
        self.bookmarks_sent = 0
        self._connections: set[socket.socket] = set()
        server = self

        class Handler(_Handler):
            api = server

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="fake-apiserver", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeApiServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
            connections = list(self._connections)
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def write_kubeconfig(self, path: Path, context: str = "fake", namespace: str = "default") -> Path:
        import yaml

        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": TOKEN}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        }))
        return path

    # ------------------------------------------------------------------ what tests change

    def put(self, key: tuple[str, str], obj: dict, namespace: str = "default") -> dict:
        """Create or replace an object (as a controller would); one event, a new version."""
        with self.cond:
            return self._store(key, copy.deepcopy(obj), namespace)

    def update(self, key: tuple[str, str], name: str, change: Callable[[dict], None],
               namespace: str = "default") -> dict:
        with self.cond:
            obj = copy.deepcopy(self.objects[key][(self._ns(key, namespace), name)])
            change(obj)
            return self._store(key, obj, namespace)

    def remove(self, key: tuple[str, str], name: str, namespace: str = "default") -> dict | None:
        with self.cond:
            return self._remove(key, self._ns(key, namespace), name)

    def get(self, key: tuple[str, str], name: str, namespace: str = "default") -> dict | None:
        with self.cond:
            return copy.deepcopy(self.objects[key].get((self._ns(key, namespace), name)))

    def names(self, key: tuple[str, str]) -> list[str]:
        with self.cond:
            return sorted(name for _, name in self.objects[key])

    def append_log(self, pod: str, *texts: str, namespace: str = "default") -> None:
        with self.cond:
            log = self.logs.setdefault((namespace, pod), _Log())
            log.lines.extend((now_rfc3339(), text) for text in texts)
            self.cond.notify_all()

    def close_log(self, pod: str, namespace: str = "default") -> None:
        """The container ended: followed streams of this log finish."""
        with self.cond:
            self.logs.setdefault((namespace, pod), _Log()).closed = True
            self.cond.notify_all()

    def restart_container(self, pod: str, namespace: str = "default") -> None:
        """The container restarts in place (restartPolicy OnFailure): its old log stream ends,
        a new, empty log begins and restartCount goes up."""
        with self.cond:
            old = self.logs.setdefault((namespace, pod), _Log())
            self.logs[(namespace, pod)] = _Log()
            old.closed = True
            obj = copy.deepcopy(self.objects[PODS][(namespace, pod)])
            for status in obj["status"].get("containerStatuses") or []:
                status["restartCount"] = int(status.get("restartCount") or 0) + 1
            self._store(PODS, obj, namespace)

    def drop_streams(self, then: Callable[[], None] | None = None) -> None:
        """Break every open watch and log stream mid-way (no final chunk). `then` runs under
        the same lock, so a client reconnecting sees its changes, never the state between."""
        with self.cond:
            self.generation += 1
            if then:
                then()
            self.cond.notify_all()

    def silence_watches(self) -> None:
        """Open watch streams stay open and say nothing more (a half-dead connection)."""
        with self.cond:
            self.generation += 1
            self.silenced = self.generation
            self.cond.notify_all()

    def compact(self) -> None:
        """Forget history: a watch from any version older than the current one gets 410 Gone."""
        with self.cond:
            self.compacted = self.rv
            self.cond.notify_all()

    def bookmark(self) -> None:
        with self.cond:
            self.bookmarks += 1
            self.cond.notify_all()

    def wait_watching(self, key: tuple[str, str] = PODS, count: int = 1, timeout: float = 30.0) -> None:
        """Block until `count` watch streams of `key` opened since the last drop/silence are open."""
        with self.cond:
            if not self.cond.wait_for(lambda: sum(1 for k, g in self.streaming
                                                  if k == key and g == self.generation) >= count, timeout):
                raise AssertionError(f"no open watch of {key[1]} after {timeout}s")

    def wait_bookmarks_sent(self, count: int, timeout: float = 30.0) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.bookmarks_sent >= count, timeout):
                raise AssertionError(f"fewer than {count} bookmarks sent after {timeout}s")

    def compact_before(self, version: int) -> None:
        """Forget history older than `version`: watches from an earlier version get 410 Gone."""
        with self.cond:
            self.compacted = version
            self.cond.notify_all()

    def requests_for(self, method: str, path_part: str, watch: bool | None = None) -> list[Request]:
        with self.cond:
            found = [r for r in self.requests if r.method == method and path_part in r.path]
        if watch is not None:
            found = [r for r in found if (r.query.get("watch", "").lower() in ("true", "1")) == watch]
        return found

    # ------------------------------------------------------------------ store (call with the lock)

    def _ns(self, key: tuple[str, str], namespace: str) -> str:
        return namespace if SERVED[key][1] else ""

    def _next(self) -> int:
        self.rv += 1
        return self.rv

    def _store(self, key: tuple[str, str], obj: dict, namespace: str) -> dict:
        meta = obj.setdefault("metadata", {})
        ns = self._ns(key, meta.get("namespace") or namespace)
        if ns:
            meta["namespace"] = ns
        old = self.objects[key].get((ns, meta["name"]))
        meta.setdefault("uid", (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", (old or {}).get("metadata", {}).get("creationTimestamp")
                        or now_rfc3339())
        kind, _ = SERVED[key]
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", key[0].removeprefix("apis/").removeprefix("api/"))
        meta["resourceVersion"] = str(self._next())
        self.objects[key][(ns, meta["name"])] = obj
        self.history.append((self.rv, key, "MODIFIED" if old else "ADDED", copy.deepcopy(obj)))
        self.cond.notify_all()
        return copy.deepcopy(obj)

    def _remove(self, key: tuple[str, str], ns: str, name: str) -> dict | None:
        obj = self.objects[key].pop((ns, name), None)
        if obj is None:
            return None
        obj["metadata"]["resourceVersion"] = str(self._next())
        self.history.append((self.rv, key, "DELETED", copy.deepcopy(obj)))
        if key == PODS:
            self.logs.setdefault((ns, name), _Log()).closed = True
        self.cond.notify_all()
        return obj


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: FakeApiServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    # ------------------------------------------------------------------ plumbing

    def setup(self) -> None:
        super().setup()
        with self.api.cond:
            self.api._connections.add(self.connection)

    def finish(self) -> None:
        with self.api.cond:
            self.api._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def _send_json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _break(self) -> None:
        """Drop the connection mid-stream, as a broken network or a restarted server does."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def _route(self) -> tuple[str, dict[str, str], Any]:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        body = self._body() if self.command in ("POST", "PATCH", "PUT", "DELETE") else None
        with self.api.cond:
            self.api.requests.append(Request(self.command, parts.path, query, body))
        return parts.path.strip("/"), query, body

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self._send_json(401, _status(401, "Unauthorized", "Unauthorized"))
        return False

    # ------------------------------------------------------------------ verbs

    def do_GET(self) -> None:  # noqa: N802
        path, query, _ = self._route()
        if path == "apis/v2beta1/healthz":  # the Pipelines API, for the preflight test
            if self.api.healthz_ok:
                self._send_json(200, {"multi_user": False})
            else:
                self._send_json(503, {"error": "unavailable"})
            return
        if not self._authorised():
            return
        if path == "version":
            self._send_json(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.1-fake", "platform": "linux/amd64"})
            return
        target = self._target(path)
        if target is None:
            return
        key, ns, name, sub = target
        if name is None:
            if query.get("watch", "").lower() in ("true", "1"):
                self._watch(key, ns, query)
            else:
                self._list(key, ns, query)
        elif sub == "log":
            self._log(ns, name, query)
        else:
            with self.api.cond:
                obj = copy.deepcopy(self.api.objects[key].get((ns, name)))
            if obj is None:
                self._not_found(key, name)
            else:
                self._send_json(200, obj)

    def _write_request(self) -> tuple[tuple[str, str], str, str | None, Any] | None:
        """(collection, namespace, name, body) of an authorised write, or None once answered."""
        path, _, body = self._route()
        if not self._authorised():
            return None
        target = self._target(path)
        return None if target is None else (target[0], target[1], target[2], body)

    def do_POST(self) -> None:  # noqa: N802
        request = self._write_request()
        if request is None:
            return
        key, ns, _, body = request
        name = ((body or {}).get("metadata") or {}).get("name")
        with self.api.cond:
            if (ns, name) in self.api.objects[key]:
                self._send_json(409, _status(409, "AlreadyExists", f'{key[1]} "{name}" already exists',
                                             {"name": name, "kind": key[1]}))
                return
            body.setdefault("status", {"phase": "Pending"} if key == PODS else {})
            if not body["status"]:
                del body["status"]
            created = self.api._store(key, body, ns)
        self._send_json(201, created)
        for hook in list(self.api.on_create):
            hook(key, copy.deepcopy(created))

    def do_PATCH(self) -> None:  # noqa: N802
        request = self._write_request()
        if request is None:
            return
        key, ns, name, body = request
        with self.api.cond:
            obj = self.api.objects[key].get((ns, name))
            if obj is None:
                self._not_found(key, name)
                return
            patched = merge_patch(obj, body)  # the fake also merges strategic patches this way
            patched["metadata"] = dict(patched["metadata"], name=name)
            stored = self.api._store(key, patched, ns)
        self._send_json(200, stored)

    def do_DELETE(self) -> None:  # noqa: N802
        request = self._write_request()
        if request is None:
            return
        key, ns, name, _ = request
        with self.api.cond:
            obj = self.api._remove(key, ns, name)
        if obj is None:
            self._not_found(key, name)
        else:
            self._send_json(200, obj)

    # ------------------------------------------------------------------ resources

    def _target(self, path: str) -> tuple[tuple[str, str], str, str | None, str | None] | None:
        """(collection key, namespace, name, subresource) of a path; answers 404 itself."""
        parts = path.split("/")
        prefix_len = 2 if parts[0] == "api" else 3
        prefix = "/".join(parts[:prefix_len])
        rest = parts[prefix_len:]
        if parts[0] == "apis" and not rest and len(parts) == 3:
            self._discovery(prefix)
            return None
        ns = ""
        if len(rest) >= 2 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        if not rest:
            self._send_json(404, _status(404, "NotFound", "the server could not find the requested resource", {}))
            return None
        key = (prefix, rest[0])
        if key not in self.api.served or SERVED[key][1] != bool(ns):
            self._send_json(404, _status(404, "NotFound", "the server could not find the requested resource", {}))
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return key, ns, name, sub

    def _discovery(self, prefix: str) -> None:
        group_version = prefix.removeprefix("apis/")
        resources = [{"name": plural, "namespaced": namespaced, "kind": kind,
                      "verbs": ["create", "delete", "get", "list", "patch", "watch"]}
                     for (p, plural), (kind, namespaced) in SERVED.items()
                     if p == prefix and (p, plural) in self.api.served]
        if not resources:
            self._send_json(404, _status(404, "NotFound", "the server could not find the requested resource", {}))
            return
        self._send_json(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                              "resources": resources})

    def _not_found(self, key: tuple[str, str], name: str) -> None:
        group = key[0].split("/")[1] if key[0].startswith("apis/") else ""
        self._send_json(404, _status(404, "NotFound", f'{key[1]} "{name}" not found',
                                     {"name": name, "group": group, "kind": key[1]}))

    def _matches(self, obj: dict, ns: str, query: dict[str, str]) -> bool:
        meta = obj.get("metadata") or {}
        if ns and meta.get("namespace") != ns:
            return False
        if query.get("labelSelector") and not _labels_match(query["labelSelector"], meta.get("labels") or {}):
            return False
        if query.get("fieldSelector") and not _fields_match(query["fieldSelector"], obj):
            return False
        return True

    def _list(self, key: tuple[str, str], ns: str, query: dict[str, str]) -> None:
        with self.api.cond:
            items = [copy.deepcopy(o) for (_, name), o in sorted(self.api.objects[key].items(),
                                                                 key=lambda kv: kv[0])
                     if self._matches(o, ns, query)]
            version = str(self.api.rv)
        kind = SERVED[key][0]
        self._send_json(200, {"kind": f"{kind}List", "apiVersion": key[0].split("/", 1)[1],
                              "metadata": {"resourceVersion": version}, "items": items})

    def _watch(self, key: tuple[str, str], ns: str, query: dict[str, str]) -> None:
        api = self.api
        bookmarks_allowed = query.get("allowWatchBookmarks", "").lower() in ("true", "1")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        with api.cond:
            since = query.get("resourceVersion") or ""
            position = int(since) if since not in ("", "0") else api.rv
            if since not in ("", "0") and position < api.compacted:
                status = _status(410, "Expired", f"too old resource version: {position} ({api.compacted})")
                if api.gone_as_http_status:
                    self._send_json(410, status)
                    return
                gone = True
            else:
                gone = False
            generation, bookmarks = api.generation, api.bookmarks
        self._start_chunked("application/json")
        if gone:
            self._chunk(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
            self._end_chunks()
            return
        entry = (key, generation)
        with api.cond:
            api.streaming.append(entry)
            api.cond.notify_all()
        try:
            self._stream_events(key, ns, query, position, generation, bookmarks, bookmarks_allowed, deadline)
        finally:
            with api.cond:
                api.streaming.remove(entry)

    def _stream_events(self, key: tuple[str, str], ns: str, query: dict[str, str], position: int,
                       generation: int, bookmarks: int, bookmarks_allowed: bool, deadline: float) -> None:
        api = self.api
        silent = False
        while True:
            with api.cond:
                while True:
                    if api.stopping:
                        return self._break()
                    if not silent and api.generation != generation:
                        if generation < api.silenced:
                            silent = True  # open before silence_watches(): say nothing more, ever
                        else:
                            return self._break()
                    if silent:
                        api.cond.wait()
                        continue
                    pending = [(rv, kind, obj) for rv, k, kind, obj in api.history
                               if rv > position and k == key and self._matches(obj, ns, query)]
                    bookmark = bookmarks_allowed and api.bookmarks != bookmarks
                    remaining = deadline - time.monotonic()
                    if pending or bookmark or remaining <= 0:
                        break
                    api.cond.wait(remaining)
                position = api.rv
                bookmarks = api.bookmarks
            if not pending and not bookmark:
                self._end_chunks()  # the server-side timeout: a clean end
                return
            data = b"".join(json.dumps({"type": kind, "object": obj}).encode() + b"\n" for _, kind, obj in pending)
            if bookmark:
                data += json.dumps({"type": "BOOKMARK", "object": {
                    "kind": SERVED[key][0], "apiVersion": key[0].split("/", 1)[1],
                    "metadata": {"resourceVersion": str(position)}}}).encode() + b"\n"
            try:
                self._chunk(data)
            except OSError:
                return
            if bookmark:
                with api.cond:
                    api.bookmarks_sent += 1
                    api.cond.notify_all()

    def _log(self, ns: str, name: str, query: dict[str, str]) -> None:
        api = self.api
        follow = query.get("follow", "").lower() in ("true", "1")
        stamps = query.get("timestamps", "").lower() in ("true", "1")
        with api.cond:
            pod = api.objects[PODS].get((ns, name))
            if pod is None:
                self._not_found(PODS, name)
                return
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            started = any((s.get("state") or {}).get("running") or (s.get("state") or {}).get("terminated")
                          for s in statuses)
            container = query.get("container", "node")
            names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
            if names and container not in names:
                self._send_json(400, _status(400, "BadRequest", f"container {container} is not valid for pod {name}"))
                return
            if not started:
                self._send_json(400, _status(400, "BadRequest", f'container "{container}" in pod "{name}" '
                                             "is waiting to start: ContainerCreating"))
                return
            log = api.logs.setdefault((ns, name), _Log())
            generation = api.generation

        def render(lines: list[tuple[str, str]]) -> bytes:
            return b"".join(((f"{stamp} {text}" if stamps else text) + "\n").encode() for stamp, text in lines)

        if not follow:
            with api.cond:
                data = render(list(log.lines))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._start_chunked("text/plain")
        sent = 0
        while True:
            with api.cond:
                while (sent == len(log.lines) and not log.closed and api.generation == generation
                       and not api.stopping):
                    api.cond.wait()
                fresh = log.lines[sent:]
                sent = len(log.lines)
                closed, broken = log.closed, api.generation != generation or api.stopping
            try:
                if fresh and not broken:
                    self._chunk(render(fresh))
                if broken:
                    return self._break()
                if closed:
                    self._end_chunks()
                    return
            except OSError:
                return


# ---------------------------------------------------------------------- objects tests put in


def worker_pod(job: str, rank: int, attempt: int = 0, phase: str = "Pending", name: str | None = None,
               node: str = "kind-control-plane") -> dict:
    """A pod as JobSet + the Job controller make it for a TrainJob's `node` replicated job."""
    name = name or f"{job}-node-0-{rank}-a{attempt}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {
            "jobset.sigs.k8s.io/jobset-name": job,
            "jobset.sigs.k8s.io/restart-attempt": str(attempt),
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "batch.kubernetes.io/job-completion-index": str(rank),
        }},
        "spec": {"nodeName": node, "containers": [{"name": "node", "image": "kfcockpit-base:0.1.0"}]},
        "status": pod_status(phase),
    }


def pod_status(phase: str, exit_code: int | None = None) -> dict:
    status: dict = {"phase": phase}
    if phase == "Pending":
        status["containerStatuses"] = [{"name": "node", "restartCount": 0,
                                        "state": {"waiting": {"reason": "ContainerCreating"}}}]
    elif phase == "Running":
        status["containerStatuses"] = [{"name": "node", "restartCount": 0,
                                        "state": {"running": {"startedAt": now_rfc3339()}}}]
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    else:
        code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
        status["containerStatuses"] = [{"name": "node", "restartCount": 0, "state": {"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error",
            "startedAt": now_rfc3339(-5), "finishedAt": now_rfc3339()}}}]
    return status


def set_phase(phase: str, exit_code: int | None = None) -> Callable[[dict], None]:
    def change(pod: dict) -> None:
        pod["status"] = pod_status(phase, exit_code)
    return change


def pod_metrics(pod: dict, **usage: dict[str, str]) -> dict:
    """The PodMetrics metrics-server reports for a pod: container name -> {"cpu", "memory"}."""
    meta = pod["metadata"]
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {})},
            "timestamp": now_rfc3339(), "window": "15s",
            "containers": [{"name": name, "usage": dict(u)} for name, u in usage.items()]}


PODMETRICS = ("apis/metrics.k8s.io/v1beta1", "pods")
TRAINJOBS = ("apis/trainer.kubeflow.org/v1alpha1", "trainjobs")
JOBSETS = ("apis/jobset.x-k8s.io/v1alpha2", "jobsets")


def train_job(name: str, num_nodes: int = 2, claim: str = "checkpoints") -> dict:
    """A TrainJob as the lesson declares it (numNodes, the checkpoint PVC via runtimePatches)."""
    pod_spec = {"volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": claim}}],
                "containers": [{"name": "node", "volumeMounts": [{"name": "checkpoints",
                                                                   "mountPath": "/checkpoints"}]}]}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "kfcockpit-torch", "kind": "TrainingRuntime",
                                "apiGroup": "trainer.kubeflow.org"},
                 "trainer": {"numNodes": num_nodes},
                 "runtimePatches": [{"manager": "kfcockpit.io/lesson", "trainingRuntimeSpec": {"template": {"spec": {
                     "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                         "spec": pod_spec}}}}]}}}}]},
    }


def job_set(name: str, restarts: int = 0, ready: int = 0, max_restarts: int = 3) -> dict:
    """The JobSet the Trainer makes from a TrainJob (same name): one `node` Job of N pods."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
        "spec": {"failurePolicy": {"maxRestarts": max_restarts},
                 "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {"parallelism": 2}}}]},
        "status": {"restarts": restarts,
                   "replicatedJobsStatus": [{"name": "node", "ready": ready, "succeeded": 0, "failed": 0,
                                             "active": 1, "suspended": 0}]},
    }


def condition(kind: str, reason: str = "", message: str = "") -> dict:
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": now_rfc3339()}
