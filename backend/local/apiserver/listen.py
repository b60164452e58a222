"""The API server on the wire: HTTPS on loopback, on the port this state root had before when it is
free (so a kubeconfig read earlier still points at it), with the state root's certificate, and
the kubeconfig that names both (credentials.py)."""

from __future__ import annotations

import logging
import socket
import ssl
from pathlib import Path

from aiohttp import web

from backend.local.apiserver import credentials
from backend.local.apiserver.server import ApiServer

log = logging.getLogger("kfcockpit.apiserver")


class Listener:
    def __init__(self, server: ApiServer, pki: credentials.Credentials):
        self.server, self.pki = server, pki
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self, port_file: Path, kubeconfig: Path) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.pki.server_cert, self.pki.server_key)
        context.set_alpn_protocols(["http/1.1"])
        self._runner = web.AppRunner(self.server.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        sock = listen(port_file)
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, ssl_context=context, shutdown_timeout=0.5).start()
        credentials.write_kubeconfig(kubeconfig, f"https://127.0.0.1:{self.port}", self.pki)
        log.info("Kubernetes API on https://127.0.0.1:%d (kubeconfig %s)", self.port, kubeconfig)

    async def close(self) -> None:
        self.server.store.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()


def listen(port_file: Path) -> socket.socket:
    """A loopback socket on the port in `port_file` when it is free (else any), written back."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        previous = int(port_file.read_text())
    except (OSError, ValueError):
        previous = 0
    try:
        sock.bind(("127.0.0.1", previous))
    except OSError:
        sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(False)
    port_file.write_text(str(sock.getsockname()[1]))
    return sock
