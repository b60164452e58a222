"""Real Ray, started once per test session: a Ray run costs about a minute of CPU on two cores
(every Ray Train actor is a process importing ray.train, pandas and, for the workers, torch), so
one measured comparison (a TrainJob and a RayJob on the embedded cluster, each with a worker pod
killed) serves many assertions: the Ray survivor's, and the RayJob's life on the cluster as its
pods and summaries showed it (rayjob_record.py), up to its delete. An uninterrupted torchrun run of
the same loop, started beside it, is the bitwise reference."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from backend.compare import Comparison, ComparisonPlan, run_comparison
from backend.compare.resources import ray_job
from backend.connect import connect
from backend.local.embedded import Embedded
from backend.local.node.podspec import cluster_marker
from backend.processes import sweep
from backend.models import LogLine
from backend.settings import Settings
from tests.ray.rayjob_record import RayJobRecord, after_the_run, recording
from tests.training.conftest import env, torchrun_cmd
from training.options import option_args

REPO = Path(__file__).resolve().parents[2]
KFCOCKPIT = Path(sys.executable).with_name("kfcockpit")
# 10 steps per epoch: 3 epochs. A step's pause is longer than Ray usually takes to see a dead
# worker and tear the group down (a 0.2 s health-check poll): the survivor, pausing between steps
# when the kill lands, mostly reaches its save while the teardown waits for it; its failed
# collective may come first on a busy machine (tests/ray/test_ray_train.py holds either way).
PLAN = ComparisonPlan(workers=2, steps=30, ckpt_every=5, kill_at_step=12, kill_rank=1,
                      step_delay=0.5, samples=640)


@dataclass
class Measured:
    settings: Settings
    comparison: Comparison
    ray_lines: list[LogLine]  # every line of the job, as the Cluster protocol streams them
    trainer_lines: list[LogLine]
    rayjob: RayJobRecord  # the Ray side's job as the cluster showed it, then deleted

    @property
    def ray(self):
        return self.comparison.side("ray")

    @property
    def trainer(self):
        return self.comparison.side("trainer")


@pytest.fixture(scope="session")
def state_root():
    # Short on purpose: Ray's socket paths under <home>/ray must stay within 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="kfr-", dir="/tmp"))
    yield root
    embedded = Embedded(root)
    try:
        asyncio.run(embedded.down())
    finally:
        sweep(cluster_marker(embedded.layout.root))
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def straight(state_root: Path) -> subprocess.Popen:
    """PLAN's loop in plain torchrun, never killed: the bitwise reference for both sides. Started
    before the comparison, it runs while that one mostly sleeps; read with `straight_metrics`."""
    options = {k: v for k, v in PLAN.train_options().items() if k != "step_delay"}  # pacing only
    cmd = torchrun_cmd(PLAN.workers, *option_args(options), "--ckpt-dir", str(state_root / "straight"))
    proc = subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def straight_metrics(straight: subprocess.Popen, state_root: Path) -> dict:
    _, err = straight.communicate(timeout=240)
    assert straight.returncode == 0, err[-2000:]
    return json.loads((state_root / "straight" / "metrics.json").read_text())


@pytest.fixture(scope="session")
def measured(state_root: Path, straight: subprocess.Popen) -> Measured:
    settings = Settings(home=state_root)

    async def measure() -> Measured:
        # Lines as they streamed: a killed pod is deleted, and its log with it, as on any cluster.
        streamed: dict[str, list[LogLine]] = {}
        cluster = await asyncio.to_thread(connect, settings)  # starts the embedded cluster
        record = RayJobRecord()
        try:
            async with recording(cluster, record):
                comparison = await run_comparison(
                    settings, PLAN, on_lines=lambda job, batch: streamed.setdefault(job, []).extend(batch))
            assert record.job == comparison.side("ray").job
            applied, _ = ray_job(record.job, PLAN, record.job.removesuffix("-ray"))  # as measure_ray made it
            await after_the_run(cluster, record, applied)
        finally:
            await cluster.close()
        return Measured(settings, comparison, streamed[comparison.side("ray").job],
                        streamed[comparison.side("trainer").job], record)

    return asyncio.run(measure())


def run_cli(*args: str, home: Path | None = None, module: str | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """`kfcockpit ARGS` (or `python -m MODULE ARGS`) in a real process."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    if home is not None:
        env["KFCOCKPIT_HOME"] = str(home)
    cmd = [sys.executable, "-m", module, *args] if module else [str(KFCOCKPIT), *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
