"""Fixtures for the embedded cluster: a fresh state root per test, driven through the one client
path (`connect` → the kube backend on its kubeconfig), and a controller that is always stopped at
the end (with every process it started), whatever the test did."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import pytest
import yaml

from backend.connect import connect
from backend.kube.cluster import KubeCluster
from backend.local.embedded import Embedded
from backend.local.node.podspec import cluster_marker
from backend.processes import marked_processes, sweep
from backend.models import LABEL_JOB, TrainJob, parse_manifests
from backend.settings import Settings

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
WAIT = 300.0  # seconds; generous: the machine has two cores shared by everyone


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@asynccontextmanager
async def embedded_cluster(home: Path) -> AsyncIterator[KubeCluster]:
    """The embedded cluster on `home`, started and connected to as the cockpit does; stopped
    after, its controller killed if it would not stop and every process it started swept."""
    cluster = await asyncio.to_thread(connect, Settings(home=home))
    embedded = Embedded(home)
    try:
        yield cluster
    finally:
        await cluster.close()
        try:
            await embedded.down()
        finally:
            pid = embedded.client.controller_pid()
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            sweep(cluster_marker(embedded.layout.root))


@pytest.fixture
async def cluster(home: Path):
    async with embedded_cluster(home) as cluster:
        yield cluster


@pytest.fixture
def embedded(home: Path) -> Embedded:
    """The life cycle and layout of the `cluster` fixture's embedded cluster."""
    return Embedded(home)


def lesson_resources() -> list:
    return [r for name in ("runtime.yaml", "volume.yaml") for r in parse_manifests((MANIFESTS / name).read_text())]


def lesson_job(name: str = "lesson-ddp", steps: int | None = None, step_delay: float | None = None,
               ckpt_dir: str | None = None, annotations: dict | None = None) -> TrainJob:
    """The lesson's TrainJob (manifests/trainjob.yaml), with a few arguments changed."""
    (job,) = parse_manifests((MANIFESTS / "trainjob.yaml").read_text())
    data = job.to_manifest()
    data["metadata"]["name"] = name
    if annotations:
        data["metadata"]["annotations"] = annotations
    args = data["spec"]["trainer"]["args"]
    for flag, value in (("--steps", steps), ("--step-delay", step_delay), ("--ckpt-dir", ckpt_dir)):
        if value is not None:
            args[args.index(flag) + 1] = str(value)
    (changed,) = parse_manifests(yaml.safe_dump(data))
    return changed


async def run_until_step(cluster: KubeCluster, job: str, step: int) -> None:
    """Return once the job's log shows a step at or past `step`."""
    async for batch in cluster.stream_logs(job):
        if any(line.step is not None and line.step >= step for line in batch):
            return



async def kill_rank_at_step(cluster: KubeCluster, job: str, rank: int, step: int) -> tuple[object, list]:
    """Follow the job's log to its end (the replacement pods too), killing the pod of node rank
    `rank` once a step at or past `step` shows; (the pod killed, every line read)."""
    lines, victim = [], None
    async for batch in cluster.stream_logs(job):
        lines += batch
        if victim is None and any(line.step is not None and line.step >= step for line in batch):
            victim = next(p for p in await cluster.list_pods(job) if p.rank == rank)
            await cluster.kill_pod(victim.name)
    assert victim is not None, f"{job} ended before step {step}"
    return victim, lines

async def apply_all(cluster: KubeCluster, *resources) -> None:
    for resource in resources:
        await cluster.apply(resource)


async def wait_for_pods(cluster: KubeCluster, job: str, predicate) -> list:
    """The job's pods once `predicate(pods by name)` holds, driven by the pod watch."""
    pods: dict[str, object] = {}
    async for event in cluster.watch_pods(job):
        if event.type.value == "DELETED":
            pods.pop(event.pod.name, None)
        else:
            pods[event.pod.name] = event.pod
        assert event.pod.labels[LABEL_JOB] == job
        if predicate(pods):
            return sorted(pods.values(), key=lambda p: p.rank)
    raise AssertionError("the pod watch ended")


def cluster_processes(home: Path) -> list[int]:
    return list(marked_processes(cluster_marker(Embedded(home).layout.root)))


def kubectl(home: Path, *args: str, timeout: float = WAIT) -> subprocess.CompletedProcess:
    """The venv's real kubectl on the embedded cluster of `home` (its kubeconfig)."""
    env = dict(os.environ, KUBECONFIG=str(home / "kubeconfig"))
    return subprocess.run([str(Path(sys.executable).parent / "kubectl"), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def cluster_events(home: Path) -> list[str]:
    """What the cluster recorded, oldest first, a line each: a failed count or wait names its cause."""
    items = json.loads(kubectl(home, "get", "events", "-A", "-o", "json").stdout)["items"]
    items.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return [f'{e.get("lastTimestamp")} {e["involvedObject"]["kind"]}/{e["involvedObject"]["name"]} '
            f'{e["reason"]}: {e.get("message", "")}' for e in items]


def cli(home: Path, *args: str, timeout: float = WAIT) -> subprocess.CompletedProcess:
    """The `kfcockpit` command of this environment, on the state root `home`."""
    env = dict(os.environ, KFCOCKPIT_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.run([str(Path(sys.executable).parent / "kfcockpit"), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
