"""The lesson's steps 4-7 through the one client path (`connect`: the kube backend on a
kubeconfig context), on the embedded cluster in `make test`, or on a real cluster:

    KFCOCKPIT_E2E_CONTEXT=kind-kind make test-e2e        (KFCOCKPIT_E2E_NAMESPACE, default: default)

A real cluster must be prepared as README's "On a real cluster" says (Trainer, the kfcockpit-torch
runtime, a snapshot-capable default StorageClass, the base image on the nodes). Every object it
creates has a per-run name and is deleted at the end; the lesson's own `checkpoints` volume and
`lesson-ddp` job are left alone. The embedded cluster is one of its own, stopped at the end.

4. A two-worker TrainJob is created, its two pods start together and finish.
5. After the run its checkpoints are visible from a separate (reader) pod.
6. A worker killed mid-training: the group restarts and resumes from a step later than zero.
7. Two runs with different worker counts, a snapshot after each, their metrics compared.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from backend.models import JobPhase, PodPhase, parse_manifests, parse_resource
from backend.settings import Settings
from training.logfmt import parse_line

pytestmark = [pytest.mark.e2e]

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
RUN = f"e2e-{secrets.token_hex(3)}"
VOLUME = f"{RUN}-ckpt"
JOB_TIMEOUT = 900.0  # a guard for image pulls and scheduling on a slow laptop, not a speed goal
DONE = frozenset({JobPhase.COMPLETE, JobPhase.FAILED})


CONTEXT = os.environ.get("KFCOCKPIT_E2E_CONTEXT")
# The embedded cluster's state root: a path only, made when the cluster starts, so collecting this
# module without running it leaves nothing behind.
EMBEDDED_HOME = Path(tempfile.gettempdir()) / f"kf{RUN}"


def settings() -> Settings:
    if CONTEXT:
        return Settings(backend="kube", context=CONTEXT, namespace=os.environ.get("KFCOCKPIT_E2E_NAMESPACE", "default"))
    return Settings(home=EMBEDDED_HOME)


def train_job(name: str, nodes: int, steps: int, step_delay: float):
    """manifests/trainjob.yaml with its own name, worker count, length and volume."""
    doc = yaml.safe_load((MANIFESTS / "trainjob.yaml").read_text())
    doc["metadata"]["name"] = name
    doc["spec"]["trainer"]["numNodes"] = nodes
    doc["spec"]["trainer"]["args"] = ["--steps", str(steps), "--ckpt-dir", f"/checkpoints/{name}",
                                      "--ckpt-every", "5", "--step-delay", str(step_delay)]
    pod = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    pod["template"]["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = VOLUME
    return parse_resource(doc, name)


@pytest.fixture(scope="module", autouse=True)
def cleanup():
    yield
    from backend.cluster import Unavailable
    from backend.local.embedded import Embedded

    try:
        if CONTEXT:
            asyncio.run(_delete_everything())
    except Unavailable:
        pass  # nothing could have been created; the tests already said why
    finally:
        if not CONTEXT:
            if EMBEDDED_HOME.exists():
                asyncio.run(Embedded(EMBEDDED_HOME).down())
            shutil.rmtree(EMBEDDED_HOME, ignore_errors=True)


async def _delete_everything() -> None:
    from backend.cluster import NotFound
    from backend.connect import connect

    cluster = connect(settings())
    try:
        for job in await cluster.list_jobs():
            if job.name.startswith(RUN):
                await cluster.delete("TrainJob", job.name)
        for snap in await cluster.snapshots():
            if snap.name.startswith(RUN):
                await cluster.delete("VolumeSnapshot", snap.name)
        try:
            await cluster.delete("PersistentVolumeClaim", VOLUME)
        except NotFound:
            pass
    finally:
        await cluster.close()


@pytest.fixture
async def cluster():
    from backend.connect import connect

    kube = await asyncio.to_thread(connect, settings())
    failing = [c for c in await kube.preflight() if not c.ok and c.name != "Pipelines endpoint"]
    assert not failing, "; ".join(f"{c.name}: {c.detail} (fix: {c.fix})" for c in failing)
    for resource in parse_manifests((MANIFESTS / "runtime.yaml").read_text()):
        await kube.apply(resource)
    (claim,) = parse_manifests((MANIFESTS / "volume.yaml").read_text())
    claim.metadata.name = VOLUME
    await kube.apply(claim)
    yield kube
    await kube.close()


async def run_to_completion(cluster, name: str, nodes: int, steps: int) -> tuple[list, object]:
    """Apply the job, record its pod events until it has finished; (events, summary)."""
    events = []

    async def record() -> None:
        async for event in cluster.watch_pods(name):
            events.append(event)

    recorder = asyncio.create_task(record())
    try:
        await cluster.apply(train_job(name, nodes, steps, step_delay=0.05))
        summary = await cluster.wait_job(name, DONE, timeout=JOB_TIMEOUT)
    finally:
        recorder.cancel()
        await asyncio.gather(recorder, return_exceptions=True)
    return events, summary


async def test_step4_two_workers_start_together_and_finish(cluster):
    name = f"{RUN}-two"
    events, summary = await run_to_completion(cluster, name, nodes=2, steps=20)
    assert summary.phase == JobPhase.COMPLETE, summary.message
    assert name in [j.name for j in await cluster.list_jobs()]
    running: set[str] = set()
    together = False
    for event in events:
        if event.pod.phase == PodPhase.RUNNING:
            running.add(event.pod.name)
        else:
            running.discard(event.pod.name)
        together = together or len(running) == 2
    assert together, "the two workers were never Running at the same time"
    pods = await cluster.list_pods(name)
    assert sorted(p.rank for p in pods) == [0, 1] and {p.phase for p in pods} == {PodPhase.SUCCEEDED}
    final = {}
    async for batch in cluster.stream_logs(name, follow=False):
        final.update({line.rank: line.loss for line in batch if line.step == 20})
    assert len(final) == 2 and final[0] == final[1]  # all-reduced: both ranks print the same loss


async def test_step5_checkpoints_are_visible_from_a_separate_pod(cluster):
    name = f"{RUN}-two"
    found = [c for c in await cluster.checkpoints(VOLUME) if c.run == name]
    assert found and all(c.valid and c.world_size == 2 for c in found)
    assert max(c.step for c in found) == 20
    # The reader pod is gone (list_pods shows training pods only, so ask for it by its label).
    assert await cluster.resources.list("Pod", label_selector="app.kubernetes.io/name=kfcockpit-reader") == []


async def test_step6_a_killed_worker_resumes_from_a_later_step(cluster):
    name = f"{RUN}-kill"
    # Paced so the kill at step 12 lands mid-run: 36 steps (5.4 s and more) are left after it.
    await cluster.apply(train_job(name, nodes=2, steps=48, step_delay=0.15))
    first_pods: set[str] = set()
    resumed_from = None
    later_step = None
    logs = cluster.stream_logs(name)
    try:
        async with asyncio.timeout(JOB_TIMEOUT):
            async for batch in logs:
                for line in batch:
                    fields = parse_line(line.text)
                    if not first_pods and line.step is not None and line.step >= 12:
                        pods = await cluster.list_pods(name)
                        first_pods = {p.name for p in pods}
                        await cluster.kill_pod(next(p.name for p in pods if p.rank == 1))
                    elif first_pods and line.pod not in first_pods and fields.get("event") == "resumed":
                        resumed_from = int(fields["from_step"])
                    elif resumed_from is not None and line.pod not in first_pods and line.step is not None:
                        later_step = max(later_step or 0, line.step)
                if later_step is not None and later_step > resumed_from:
                    break
    finally:
        await logs.aclose()
    assert first_pods, "the job never reached step 12"
    assert resumed_from is not None and resumed_from > 0
    assert later_step > resumed_from
    summary = await cluster.wait_job(name, DONE, timeout=JOB_TIMEOUT)
    assert summary.phase == JobPhase.COMPLETE and summary.restart_attempt >= 1
    (metrics,) = [m for m in await cluster.read_metrics(VOLUME) if m.run == name]
    assert metrics.resumes >= 1


async def test_step7_snapshots_of_two_runs_with_different_worker_counts(cluster):
    compared = {}
    for nodes in (2, 1):
        name = f"{RUN}-w{nodes}"
        _, summary = await run_to_completion(cluster, name, nodes=nodes, steps=20)
        assert summary.phase == JobPhase.COMPLETE, summary.message
        snap = await cluster.snapshot(VOLUME, f"{RUN}-after-w{nodes}")
        assert snap.ready and snap.volume == VOLUME
        (metrics,) = [m for m in await cluster.read_metrics(snapshot=snap.name) if m.run == name]
        compared[nodes] = metrics
    assert {n: m.world_size for n, m in compared.items()} == {2: 2, 1: 1}
    assert all(m.final_loss > 0 and m.wall_seconds > 0 for m in compared.values())
    names = {s.name for s in await cluster.snapshots()}
    assert {f"{RUN}-after-w2", f"{RUN}-after-w1"} <= names
