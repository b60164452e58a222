"""The same training loop launched both ways, measured in one invocation through the Cluster protocol
on an embedded cluster: as a TrainJob (the group recreated by the failure policy when a worker pod
dies) and as a RayJob (TorchTrainer on a private Ray; Ray restarts the group). Each run has one
worker pod killed mid-run and resumes from its last checkpoint.

Prints the comparison table (the figures `kfcockpit compare` saves for lesson step 10), then Ray's
figures as ratios of the Trainer side's, measured in this same invocation. A throwaway state root
is used (its cluster stopped at the end), so nothing is saved in your workspace.

    .venv/bin/python bench/ray_vs_trainer.py [--steps 40] [--kill-at 12] [--step-delay 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.compare import ComparisonPlan, run_comparison  # noqa: E402
from backend.local.embedded import Embedded  # noqa: E402
from backend.settings import Settings  # noqa: E402
from tui.cli.common import print_table  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--kill-at", type=int, default=12)
    p.add_argument("--step-delay", type=float, default=0.1)
    a = p.parse_args()
    plan = ComparisonPlan(workers=a.workers, steps=a.steps, kill_at_step=a.kill_at, step_delay=a.step_delay)

    home = Path(tempfile.mkdtemp(prefix="kfb-", dir="/tmp"))  # short: Ray's socket paths

    async def measure():
        try:
            return await run_comparison(Settings(home=home), plan, progress=print)
        finally:
            await Embedded(home).down()  # the controller would outlive the bench otherwise

    try:
        comparison = asyncio.run(measure())
    finally:
        shutil.rmtree(home, ignore_errors=True)
    rows = comparison.rows()
    print()
    print_table(rows[0], rows[1:])
    trainer, ray = comparison.side("trainer"), comparison.side("ray")
    print()
    for label, field in (("time to first step", "time_to_first_step"),
                         ("recovery after kill", "recovery_seconds"), ("wall time", "wall_seconds")):
        t, r = getattr(trainer, field), getattr(ray, field)
        print(f"{label}: Ray / Trainer = {r / t:.2f}  ({r:.1f} s vs {t:.1f} s)")
    print(f"steps lost: Trainer {trainer.steps_lost}, Ray {ray.steps_lost} (checkpoint every {plan.ckpt_every})")
    print("final parameters bitwise equal: " + ("yes" if comparison.same_result() else "NO"))


if __name__ == "__main__":
    main()
