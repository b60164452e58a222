"""Connecting: one clear line (Unavailable) when there is no kubeconfig, when the context is not
in it, when the API server does not answer; through the CLI that line is all the user sees,
with exit status 2."""

from __future__ import annotations

import socket

import pytest

from backend.cluster import ClusterError, Unavailable
from backend.kube.cluster import KubeCluster
from backend.kube.connection import Connection
from backend.settings import Settings
from tests.kube.apiserver import TOKEN, InProcessApi
from tui.cli import main as cli


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text
    return text


def test_missing_kubeconfig(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    missing = tmp_path / "nowhere" / "config"
    with pytest.raises(Unavailable) as failure:
        KubeCluster.from_settings(Settings(backend="kube", kubeconfig=missing))
    text = one_line(failure.value)
    assert f"no kubeconfig at {missing}" in text and "kind create cluster" in text

    monkeypatch.setenv("KUBECONFIG", str(missing))  # the same through the environment
    with pytest.raises(Unavailable, match="no kubeconfig at"):
        KubeCluster.from_settings(Settings(backend="kube"))


def test_missing_context(kubeconfig):
    with pytest.raises(Unavailable) as failure:
        KubeCluster.from_settings(Settings(backend="kube", kubeconfig=kubeconfig, context="kind-kind"))
    assert one_line(failure.value) == (f"context 'kind-kind' is not in kubeconfig {kubeconfig} "
                                       "(available: fake)")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def dead_kubeconfig(tmp_path):
    """A kubeconfig whose API server is not there (nothing listens on the port)."""
    server = InProcessApi(tmp_path)
    path = server.write_kubeconfig(tmp_path / "kubeconfig")
    server.stop()
    path.write_text(path.read_text().replace(server.url, f"http://127.0.0.1:{_closed_port()}"))
    return path


async def test_unreachable_api_server(dead_kubeconfig):
    cluster = KubeCluster.from_settings(Settings(backend="kube", kubeconfig=dead_kubeconfig))
    try:
        for call in (cluster.list_jobs(), cluster.preflight(), cluster.checkpoints("checkpoints")):
            with pytest.raises(Unavailable) as failure:
                await call
            text = one_line(failure.value)
            assert "does not answer: connection refused" in text and "context fake" in text
        with pytest.raises(Unavailable, match="does not answer"):  # a watch fails the same way
            async for _ in cluster.watch_pods():
                pass
    finally:
        await cluster.close()


async def test_refused_credentials(api, kubeconfig):
    kubeconfig.write_text(kubeconfig.read_text().replace(TOKEN, "stale-token"))
    cluster = KubeCluster.from_settings(Settings(backend="kube", kubeconfig=kubeconfig))
    try:
        with pytest.raises(ClusterError) as failure:
            await cluster.list_pods()
        assert "refused the credentials of context 'fake' (401 Unauthorized)" in one_line(failure.value)
    finally:
        await cluster.close()


@pytest.mark.parametrize("problem", ["no-kubeconfig", "no-context", "no-server"])
def test_the_cli_prints_one_line_and_exits_2(problem, tmp_path, kubeconfig, dead_kubeconfig, capsys):
    args = {"no-kubeconfig": ["--kubeconfig", str(tmp_path / "missing")],
            "no-context": ["--kubeconfig", str(kubeconfig), "--context", "kind-kind"],
            "no-server": ["--kubeconfig", str(dead_kubeconfig), "--context", "fake"]}[problem]
    assert cli(["logs", "lesson-ddp", "--backend", "kube", *args]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("kfcockpit: ") and captured.out == ""


def test_the_namespace_is_the_contexts_own_unless_one_is_given(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", namespace="lesson-ns")
    own = Connection.open(Settings(backend="kube", kubeconfig=kubeconfig))
    assert (own.context, own.namespace) == ("fake", "lesson-ns")
    given = Connection.open(Settings(backend="kube", kubeconfig=kubeconfig, namespace="other"))
    assert given.namespace == "other"
    bare = api.write_kubeconfig(tmp_path / "bare", namespace="")
    assert Connection.open(Settings(backend="kube", kubeconfig=bare)).namespace == "default"
