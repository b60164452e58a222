"""The fake API server as a test holds it: its state and faults (Store, Faults), a threading HTTP
server on 127.0.0.1 serving them (handler.py), its lifecycle, a kubeconfig for it, and the record
of every request."""

from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from tests.kube.fake_apiserver.faults import Faults
from tests.kube.fake_apiserver.handler import Handler, Request
from tests.kube.fake_apiserver.served import TOKEN, query_flag


class FakeApiServer(Faults):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Request] = []
        self.on_create: list[Callable[[tuple[str, str], dict], None]] = []  # a test playing kubelet or a controller
        self.open_connections: set[socket.socket] = set()  # every handler's socket
        server = self

        class BoundHandler(Handler):
            api = server

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), BoundHandler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="fake-apiserver", daemon=True)

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
            connections = list(self.open_connections)
        for sock in connections:  # a client blocked on a stream wakes now, not at its timeout
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

    def requests_for(self, method: str, path_part: str, watch: bool | None = None) -> list[Request]:
        with self.cond:
            found = [r for r in self.requests if r.method == method and path_part in r.path]
        if watch is not None:
            found = [r for r in found if query_flag(r.query, "watch") == watch]
        return found
