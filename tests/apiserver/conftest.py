"""The API server in-process: the real aiohttp application over a fresh registry (tests/controlplane.py),
reached through aiohttp's test client, for protocol behaviour that needs no process or kubectl."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from backend.local.apiserver.server import ApiServer
from backend.local.registry.client import Client
from tests.controlplane import plane

TOKEN = "test-token"


class NoNodes:
    """A cluster without kubelets: no pod logs, no metrics."""

    def pod_log(self, pod, options):
        raise AssertionError("no node serves logs here")

    def metrics(self, kind, namespace):
        return []


class Api:
    """Requests to the in-process API server, answered as (status, JSON body, headers)."""

    def __init__(self, client: TestClient, server: ApiServer):
        self.client, self.server = client, server
        self.store = server.store

    async def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                   raw: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
        data = raw if raw is not None else (None if body is None else
                                            (body if isinstance(body, (bytes, str)) else json.dumps(body)))
        sent = {"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type, **(headers or {})}
        async with self.client.request(method, path, data=data, headers=sent) as response:
            text = await response.text()
            try:
                parsed = json.loads(text) if text.strip() else None
            except ValueError:
                parsed = [json.loads(line) for line in text.splitlines() if line.strip()]
            return response.status, parsed, response.headers


@asynccontextmanager
async def served(client_plane: Client) -> AsyncIterator[Api]:
    """The API server over `client_plane`'s registry, with a test client."""
    server = ApiServer(client_plane.registry, NoNodes(), TOKEN)
    server.fresh_timeout = 0.2
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        yield Api(client, server)
    finally:
        await client.close()


@pytest.fixture
async def api():
    async with served(plane()) as api:
        yield api
