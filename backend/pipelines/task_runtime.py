"""What the pipeline's components do, run inside a task (a pod on a cluster, a process locally).

The lightweight components in `components.py` are thin: each imports this module and calls one
function. The code lives here because a component's source is shipped as text, while this module
is in the pinned image (on a cluster) and in the current venv (kfp.local runs tasks with it).

KFP v2 has no ResourceOp, so a task applies the TrainJob through the project's Cluster API —
the Kubernetes backend in a cluster (in-cluster credentials of the pipeline's service account),
the embedded cluster's store locally — and waits for it like `kubectl wait` would.
Everything printed here is the task's log; lines are flushed so they show as they happen.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import secrets
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from backend.models import JobPhase, JobSummary, RunMetrics, TrainJob, parse_resource
from backend.pipelines.platform import MOUNT_PATH
from backend.pipelines.task_log import outputs_line
from backend.raytrain.entrypoint import ray_train_argv
from backend.settings import Settings
from training.launch import ddp_command
from training.options import option_args

# Set by the local runner (with KFCOCKPIT_HOME) for the tasks it starts; absent in a cluster pod.
BACKEND_ENV = "KFCOCKPIT_BACKEND"
TRAINJOB_TIMEOUT_S = 3600.0
VOLUME_TIMEOUT_S = 120.0


def say(text: str) -> None:
    print(text, flush=True)


def report(**outputs: Any) -> None:
    """The task's outputs as one machine-read line: on a cluster the run reads them from the log.
    A task's last act, so it also readies the process to leave (see below)."""
    say(outputs_line(outputs))
    # What is alive now lives until the task process exits, and the next task waits for that exit:
    # frozen, it is skipped by the interpreter's collections at teardown, which would otherwise walk
    # every object of kfp's and the kubernetes client's modules (about a second on a busy machine).
    gc.freeze()


def task_settings() -> Settings:
    """The platform this task runs on: what the local runner said, else the cluster the pod is in."""
    backend = os.environ.get(BACKEND_ENV) or ("kube" if os.environ.get("KUBERNETES_SERVICE_HOST") else "local")
    if backend == "kube":
        return Settings(backend="kube")  # in-cluster config; the connection takes the pod's namespace
    return Settings(backend="local")  # the state root comes from KFCOCKPIT_HOME


def _connect(settings: Settings):
    from backend.connect import connect

    return connect(settings)


async def _with_cluster(settings: Settings, work):
    cluster = _connect(settings)
    try:
        return await work(cluster)
    finally:
        await cluster.close()


def volume_path(settings: Settings, volume: str) -> Path:
    """Where this task reads and writes the checkpoint volume. In a cluster pod the pipeline
    mounts the PVC at MOUNT_PATH; kfp.local ignores mounts, so where the platform keeps volumes on
    this machine the task uses the bound claim's directory there."""
    from backend.connect import capabilities

    here = capabilities(settings).volume_path
    if here is None:
        path = Path(MOUNT_PATH)
        if not path.is_dir():
            raise RuntimeError(f"volume {volume} is not mounted at {MOUNT_PATH}: the task needs "
                               "the pipeline's PVC mount (kfp-kubernetes mount_pvc)")
        return path

    async def work(cluster):
        await cluster.wait_volume(volume, VOLUME_TIMEOUT_S)  # a new claim's provisioner is at work

    asyncio.run(_with_cluster(settings, work))
    return here(volume)


# ---------------------------------------------------------------- step 5: the checkpoint volume


def create_volume(access_modes: list[str], size: str, pvc_name_suffix: str, storage_class_name: str) -> str:
    """The local stand-in for kfp-kubernetes CreatePVC: the same inputs, the same name form
    (a fresh UUID followed by the suffix), applied to the platform as a PersistentVolumeClaim."""
    name = f"{uuid.uuid4()}{pvc_name_suffix}"
    claim = parse_resource({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": list(access_modes), "resources": {"requests": {"storage": size}},
                 **({"storageClassName": storage_class_name} if storage_class_name else {})},
    }, "create-volume")
    settings = task_settings()

    async def work(cluster):
        return await cluster.apply(claim)

    say(asyncio.run(_with_cluster(settings, work)))
    say(f"volume={name} size={size} backend={settings.backend}")
    report(name=name)
    return name


# ---------------------------------------------------------------- step 4: submit a TrainJob and wait


def lesson_trainjob(name: str, volume: str, num_nodes: int, steps: int, ckpt_every: int,
                    step_delay: float, resources: dict, node_selector: dict) -> TrainJob:
    """The lesson's DDP TrainJob (the shape of manifests/trainjob.yaml) for one pipeline run:
    the checkpoint volume mounted into every worker, requests and node selection declared."""
    run = run_name(num_nodes)
    return parse_resource({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "kfcockpit-pipeline"}},
        "spec": {
            "runtimeRef": {"name": "kfcockpit-torch", "kind": "TrainingRuntime",
                           "apiGroup": "trainer.kubeflow.org"},
            "trainer": {
                "numNodes": num_nodes, "numProcPerNode": 1,
                "command": ddp_command(),
                "args": option_args({"steps": steps, "ckpt_dir": f"{MOUNT_PATH}/{run}",
                                     "ckpt_every": ckpt_every, "step_delay": step_delay}),
                "resourcesPerNode": resources,
            },
            "runtimePatches": [{"manager": "kfcockpit.io/pipeline", "trainingRuntimeSpec": {"template": {"spec": {
                "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                    "nodeSelector": dict(node_selector),
                    "volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": volume}}],
                    "containers": [{"name": "node", "volumeMounts": [
                        {"name": "checkpoints", "mountPath": MOUNT_PATH}]}],
                }}}}}],
            }}}}],
        },
    }, "train-job")


def run_name(num_nodes: int) -> str:
    """The run's directory on the volume: one per worker count, so two runs compare side by side."""
    return f"ddp-{num_nodes}w"


async def follow_job(cluster, job: TrainJob, timeout: float) -> JobSummary:
    """Apply the job, print its pods' phase changes and its workers' lines, return it finished."""
    name = job.metadata.name
    say(await cluster.apply(job))

    async def print_logs() -> None:
        async for batch in cluster.stream_logs(name, follow=True):
            for line in batch:
                say(f"[{line.pod}] {line.text}")

    async def print_pod_phases() -> None:
        seen: dict[str, str] = {}
        async for event in cluster.watch_pods(name):
            pod = event.pod
            if seen.get(pod.name) != pod.phase.value:
                seen[pod.name] = pod.phase.value
                say(f"pod {pod.name} rank={pod.rank} attempt={pod.restart_attempt} "
                    f"phase={pod.phase.value}" + (f" image={pod.image}" if pod.image else ""))

    logs = asyncio.create_task(print_logs())
    pods = asyncio.create_task(print_pod_phases())
    try:
        summary = await cluster.wait_job(name, frozenset({JobPhase.COMPLETE, JobPhase.FAILED}), timeout)
    finally:
        pods.cancel()
    try:  # the stream ends by itself once the job has finished; bounded in case it does not
        await asyncio.wait_for(logs, timeout=60)
    except asyncio.TimeoutError:
        pass
    await asyncio.gather(pods, return_exceptions=True)
    return summary


def train_and_wait(volume: str, num_nodes: int, steps: int, ckpt_every: int, step_delay: float,
                   resources: dict, node_selector: dict) -> tuple[str, str, float, int, float, int]:
    """Submit a `num_nodes`-worker TrainJob writing to the volume, wait for Complete/Failed.
    Returns (job, run, final_loss, world_size, wall_seconds, checkpoints)."""
    from training import checkpoint_format, metrics

    settings = task_settings()
    run = run_name(num_nodes)
    name = f"pipeline-{run}-{secrets.token_hex(3)}"  # a new job per run, never an old one's status
    job = lesson_trainjob(name, volume, num_nodes, steps, ckpt_every, step_delay, resources, node_selector)

    async def work(cluster):
        return await follow_job(cluster, job, TRAINJOB_TIMEOUT_S)

    summary = asyncio.run(_with_cluster(settings, work))
    say(f"trainjob={name} phase={summary.phase.value} workers={summary.num_nodes} "
        f"restarts={summary.restart_attempt}")
    if summary.phase != JobPhase.COMPLETE:
        raise RuntimeError(f"TrainJob {name} ended {summary.phase.value}: "
                           f"{summary.reason or summary.message or 'see its pods logs'}")
    run_dir = volume_path(settings, volume) / run
    found = metrics.read(run_dir)
    if found is None:
        raise RuntimeError(f"TrainJob {name} completed but left no {metrics.FILE_NAME} in {run}/ on {volume}")
    checkpoints = checkpoint_format.list_files(run_dir)
    say(f"run={run} final_loss={found['final_loss']:.6f} world={found['world_size']} "
        f"wall_seconds={found['wall_seconds']:.1f} checkpoints={len(checkpoints)}")
    outputs = {"job": name, "run": run, "final_loss": float(found["final_loss"]),
               "world_size": int(found["world_size"]), "wall_seconds": float(found["wall_seconds"]),
               "checkpoints": len(checkpoints)}
    # `volume` too: on a cluster CreatePVC runs inside KFP's driver and leaves no log of its name.
    report(volume=volume, **outputs)
    return tuple(outputs.values())


# ---------------------------------------------------------------- checkpoints seen from another task


def list_checkpoints(volume: str) -> tuple[int, int]:
    """Read every checkpoint on the volume from this task (not from the workers that wrote them)
    and check each one's checksum. Returns (valid checkpoints, newest step); fails if none."""
    from training import checkpoint_format

    root = volume_path(task_settings(), volume)
    valid, newest = 0, -1
    for run_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for path in checkpoint_format.list_files(run_dir):
            info = checkpoint_format.inspect(path)
            valid += info.valid
            newest = max(newest, info.step) if info.valid else newest
            say(f"checkpoint={run_dir.name}/{path.name} step={info.step} world={info.world_size} "
                f"bytes={info.size_bytes} valid={info.valid}" + (f" problem={info.problem}" if info.problem else ""))
    if not valid:
        raise RuntimeError(f"no valid checkpoint on volume {volume}")
    say(f"volume={volume} valid_checkpoints={valid} newest_step={newest}")
    report(volume=volume, valid=valid, newest_step=newest)
    return valid, newest


# ---------------------------------------------------------------- step 7: snapshots and comparison


def snapshot_volume(volume: str, label: str) -> str:
    name = f"{volume}-{label}"[:63].rstrip("-")

    async def work(cluster):
        return await cluster.snapshot(volume, name)

    snap = asyncio.run(_with_cluster(task_settings(), work))
    say(f"snapshot={snap.name} volume={snap.volume} ready={snap.ready} files={snap.files} "
        f"bytes={snap.size_bytes} runs={','.join(m.run for m in snap.metrics) or '-'}")
    report(Output=snap.name)
    return snap.name


def compare_runs(snapshot_a: str, run_a: str, snapshot_b: str, run_b: str) -> str:
    """Side by side: final loss, wall time, workers, steps of two runs, each read from its snapshot."""

    async def work(cluster):
        return [await _run_metrics(cluster, snapshot_a, run_a), await _run_metrics(cluster, snapshot_b, run_b)]

    rows = asyncio.run(_with_cluster(task_settings(), work))
    say(f"{'run':<10} {'workers':>7} {'steps':>6} {'final loss':>11} {'wall s':>8}  snapshot")
    for row in rows:
        say(f"{row['run']:<10} {row['world_size']:>7} {row['steps']:>6} {row['final_loss']:>11.6f} "
            f"{row['wall_seconds']:>8.2f}  {row['snapshot']}")
    a, b = rows
    if b["wall_seconds"] > 0:
        say(f"{a['run']} took {a['wall_seconds'] / b['wall_seconds']:.2f}x the wall time of {b['run']}")
    report(Output=json.dumps(rows, sort_keys=True))
    return json.dumps(rows, sort_keys=True)


async def _run_metrics(cluster, snapshot: str, run: str) -> dict[str, Any]:
    m = RunMetrics.of_run(await cluster.read_metrics(snapshot=snapshot), run)
    if m is None:
        raise RuntimeError(f"snapshot {snapshot} holds no metrics of run {run}")
    return {"snapshot": snapshot, "run": run, "final_loss": m.final_loss, "steps": m.steps,
            "world_size": m.world_size, "wall_seconds": m.wall_seconds}


# ---------------------------------------------------------------- step 8: Ray Train in the task


def ray_train(volume: str, num_workers: int, steps: int, ckpt_every: int) -> tuple[str, float, int]:
    """The same loop under Ray Train with `num_workers` CPU workers inside this task, checkpoints
    on the volume. Returns (run, final_loss, world_size)."""
    from training import metrics

    storage = volume_path(task_settings(), volume) / "ray"
    run = f"ray-{num_workers}w-{secrets.token_hex(3)}"
    # Ray's socket paths must stay short, so its temp dir lives in /tmp, not under the volume.
    with tempfile.TemporaryDirectory(prefix="kfc-ray-", dir="/tmp") as temp_dir:
        cmd = ray_train_argv(sys.executable, num_workers=num_workers, storage=str(storage), name=run,
                             temp_dir=temp_dir, options={"steps": steps, "ckpt_every": ckpt_every})
        say("$ " + " ".join(cmd[1:]))
        code = subprocess.call(cmd, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if code != 0:
        raise RuntimeError(f"Ray Train run {run} exited with code {code}")
    found = metrics.read(storage / run)
    if found is None:
        raise RuntimeError(f"Ray Train run {run} left no {metrics.FILE_NAME}")
    say(f"run={run} launcher=ray final_loss={found['final_loss']:.6f} world={found['world_size']}")
    report(volume=volume, run=run, final_loss=float(found["final_loss"]), world_size=int(found["world_size"]))
    return run, float(found["final_loss"]), int(found["world_size"])
