"""The HTTP side of the fake: one handler per connection (HTTP/1.1, keep-alive), the bearer token
checked, paths routed to a collection, and the verbs: discovery, /version, get, list, create
(409 AlreadyExists), JSON merge patch, delete. Watches and followed logs are streams.py's; the
wire plumbing both use (JSON answers, chunks, a dropped connection) is here.
"""

from __future__ import annotations

import copy
import json
import socket
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qs, urlsplit

from backend.local.registry.merge import merge_patch  # RFC 7386, as the embedded API server applies it
from tests.kube.fake_apiserver import streams
from tests.kube.fake_apiserver.served import PODS, SERVED, TOKEN, api_version, matches, query_flag, status

if TYPE_CHECKING:
    from tests.kube.fake_apiserver.server import FakeApiServer


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any = None
    at: float = field(default_factory=time.monotonic)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: "FakeApiServer"  # set by the server on its subclass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    # ------------------------------------------------------------------ wire plumbing

    def setup(self) -> None:
        super().setup()
        with self.api.cond:
            self.api.open_connections.add(self.connection)

    def finish(self) -> None:
        with self.api.cond:
            self.api.open_connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def send_json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def break_connection(self) -> None:
        """Drop the connection mid-stream, as a broken network or a restarted server does."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def not_found(self, key: tuple[str, str], name: str) -> None:
        group = key[0].split("/")[1] if key[0].startswith("apis/") else ""
        self.send_json(404, status(404, "NotFound", f'{key[1]} "{name}" not found',
                                   {"name": name, "group": group, "kind": key[1]}))

    def _no_resource(self) -> None:
        self.send_json(404, status(404, "NotFound", "the server could not find the requested resource", {}))

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
        self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
        return False

    # ------------------------------------------------------------------ verbs

    def do_GET(self) -> None:  # noqa: N802
        path, query, _ = self._route()
        if path == "apis/v2beta1/healthz":  # the Pipelines API, for the preflight test
            if self.api.healthz_ok:
                self.send_json(200, {"multi_user": False})
            else:
                self.send_json(503, {"error": "unavailable"})
            return
        if not self._authorised():
            return
        if path == "version":
            self.send_json(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.1-fake", "platform": "linux/amd64"})
            return
        target = self._target(path)
        if target is None:
            return
        key, ns, name, sub = target
        if name is None:
            if query_flag(query, "watch"):
                streams.serve_watch(self, key, ns, query)
            else:
                self._list(key, ns, query)
        elif sub == "log":
            streams.serve_log(self, ns, name, query)
        else:
            with self.api.cond:
                obj = copy.deepcopy(self.api.objects[key].get((ns, name)))
            if obj is None:
                self.not_found(key, name)
            else:
                self.send_json(200, obj)

    def do_POST(self) -> None:  # noqa: N802
        self._write(self._create)

    def do_PATCH(self) -> None:  # noqa: N802
        self._write(self._patch)

    def do_DELETE(self) -> None:  # noqa: N802
        self._write(self._delete)

    def _write(self, verb: Callable[[tuple[str, str], str, str | None, Any], None]) -> None:
        """An authorised write to a collection, answered by `verb(collection, namespace, name, body)`."""
        path, _, body = self._route()
        if not self._authorised():
            return
        target = self._target(path)
        if target is not None:
            key, ns, name, _ = target
            verb(key, ns, name, body)

    def _create(self, key: tuple[str, str], ns: str, _name: str | None, body: Any) -> None:
        name = ((body or {}).get("metadata") or {}).get("name")
        with self.api.cond:
            if (ns, name) in self.api.objects[key]:
                self.send_json(409, status(409, "AlreadyExists", f'{key[1]} "{name}" already exists',
                                           {"name": name, "kind": key[1]}))
                return
            body.setdefault("status", {"phase": "Pending"} if key == PODS else {})
            if not body["status"]:
                del body["status"]
            created = self.api._store(key, body, ns)
        self.send_json(201, created)
        for hook in list(self.api.on_create):
            hook(key, copy.deepcopy(created))

    def _patch(self, key: tuple[str, str], ns: str, name: str | None, body: Any) -> None:
        with self.api.cond:
            obj = self.api.objects[key].get((ns, name))
            if obj is None:
                self.not_found(key, name)
                return
            patched = merge_patch(obj, body)  # the fake also merges strategic patches this way
            patched["metadata"] = dict(patched["metadata"], name=name)
            stored = self.api._store(key, patched, ns)
        self.send_json(200, stored)

    def _delete(self, key: tuple[str, str], ns: str, name: str | None, _body: Any) -> None:
        with self.api.cond:
            obj = self.api._remove(key, ns, name)
        if obj is None:
            self.not_found(key, name)
        else:
            self.send_json(200, obj)

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
            self._no_resource()
            return None
        key = (prefix, rest[0])
        if key not in self.api.served or SERVED[key][1] != bool(ns):
            self._no_resource()
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
            self._no_resource()
            return
        self.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                             "resources": resources})

    def _list(self, key: tuple[str, str], ns: str, query: dict[str, str]) -> None:
        with self.api.cond:
            items = [copy.deepcopy(o) for (_, name), o in sorted(self.api.objects[key].items(),
                                                                 key=lambda kv: kv[0])
                     if matches(o, ns, query)]
            version = str(self.api.rv)
        kind = SERVED[key][0]
        self.send_json(200, {"kind": f"{kind}List", "apiVersion": api_version(key),
                             "metadata": {"resourceVersion": version}, "items": items})
