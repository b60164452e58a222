"""Real Ray, started once per test session: Ray's start-up is slow on two cores, so one measured
comparison (a TrainJob and a RayJob on the embedded cluster, each with a worker pod killed) serves
many assertions."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from backend.compare import Comparison, ComparisonPlan, run_comparison
from backend.local.embedded import Embedded
from backend.local.podspec import ENV_CLUSTER
from backend.processes import sweep
from backend.models import LogLine
from backend.settings import Settings

REPO = Path(__file__).resolve().parents[2]
KFCOCKPIT = Path(sys.executable).with_name("kfcockpit")
PLAN = ComparisonPlan(workers=2, steps=30, ckpt_every=5, kill_at_step=12, kill_rank=1,
                      step_delay=0.1, samples=640)  # 10 steps per epoch: 3 epochs


@dataclass
class Measured:
    settings: Settings
    comparison: Comparison
    ray_lines: list[LogLine]  # every line of the job, as the Cluster protocol streams them
    trainer_lines: list[LogLine]

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
        sweep({ENV_CLUSTER: str(embedded.layout.root)})
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def measured(state_root: Path) -> Measured:
    settings = Settings(home=state_root)

    async def measure() -> Measured:
        # Lines as they streamed: a killed pod is deleted, and its log with it, as on any cluster.
        streamed: dict[str, list[LogLine]] = {}
        comparison = await run_comparison(settings, PLAN,
                                          on_lines=lambda job, batch: streamed.setdefault(job, []).extend(batch))
        return Measured(settings, comparison, streamed[comparison.side("ray").job],
                        streamed[comparison.side("trainer").job])

    return asyncio.run(measure())


def run_cli(*args: str, home: Path | None = None, module: str | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """`kfcockpit ARGS` (or `python -m MODULE ARGS`) in a real process."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    if home is not None:
        env["KFCOCKPIT_HOME"] = str(home)
    cmd = [sys.executable, "-m", module, *args] if module else [str(KFCOCKPIT), *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
