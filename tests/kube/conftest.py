"""The kube backend against the embedded API server in-process (apiserver.py), through the real
`kubernetes` client."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, TypeVar

import pytest

from backend.kube.cluster import KubeCluster
from backend.kube.connection import Connection
from backend.settings import Settings
from tests.kube.apiserver import HANG_GUARD, InProcessApi

T = TypeVar("T")


@pytest.fixture
def api(tmp_path):
    server = InProcessApi(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(api, tmp_path):
    return api.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def settings(kubeconfig, api):
    return Settings(backend="kube", kubeconfig=kubeconfig, context="fake", namespace="default", kfp_host=api.url)


@pytest.fixture
async def cluster(settings):
    # A 1 s read timeout makes a silent watch stream count as dead quickly.
    kube = KubeCluster(Connection.open(settings), kfp_host=settings.kfp_host, watch_read_timeout=1.0,
                       reader_timeout=60.0, snapshot_timeout=30.0)
    yield kube
    await kube.close()


async def take(stream: AsyncIterator[T], count: int) -> list[T]:
    """The next `count` items of a stream."""
    items = []
    async with asyncio.timeout(HANG_GUARD):
        for _ in range(count):
            items.append(await anext(stream))
    return items


async def wait_for(condition) -> None:
    """Let a blocking wait on the server (apiserver.py: a watch open, a bookmark sent) happen off the event loop."""
    await asyncio.wait_for(asyncio.to_thread(condition), HANG_GUARD)

