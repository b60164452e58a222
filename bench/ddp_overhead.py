"""How much the training core costs over a bare DDP loop, measured in one invocation.

Throughput is steady state on both sides: from the end of the first step (DDP sets up its
buckets there) to the end of the last.

Prints steps/s of `training.ddp` (2 workers, torchrun, no checkpoints) against the plainest DDP
loop of the same model, as a ratio (goal >= 0.97), then the checkpoint save time as a fraction of
one step and what saving every 10 steps costs the loop. Runs alternate (in ABBA order, so drift
hits both sides alike); medians are reported.

The workers' step lines go to a file, as a pod's stdout does on the embedded cluster. Read through
a pipe instead, every line wakes the reading process, which on two cores takes a core from a
worker: that costs ~4% here and is the reader's cost, not the training core's.

    .venv/bin/python bench/ddp_overhead.py [--steps 1500] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from training.launch import TORCHRUN, ddp_command, with_python  # noqa: E402
from training.logfmt import parse_line  # noqa: E402

TORCHRUN_OPTIONS = ("--standalone", "--nproc-per-node=2")  # the same for both sides
ENV = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


def _run(cmd: list[str]) -> list[dict[str, str]]:
    with tempfile.TemporaryFile("w+") as log:
        subprocess.run(cmd, cwd=REPO, env=ENV, stdout=log, stderr=subprocess.DEVNULL, text=True, check=True)
        log.seek(0)
        return [parse_line(line) for line in log]


def ours(steps: int, ckpt_dir: str | None = None, ckpt_every: int = 10) -> list[dict[str, str]]:
    extra = ["--ckpt-dir", ckpt_dir, "--ckpt-every", str(ckpt_every)] if ckpt_dir else []
    return _run(with_python(ddp_command(*TORCHRUN_OPTIONS, args=["--steps", str(steps), *extra]), sys.executable))


def rank0_done(records: list[dict[str, str]]) -> dict[str, str]:
    return next(r for r in records if r.get("event") == "done" and r.get("rank") == "0")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args()

    core, plain = [], []

    def run_core() -> None:
        core.append(float(rank0_done(ours(a.steps))["steps_per_sec"]))

    def run_plain() -> None:
        plain_ddp = [TORCHRUN, *TORCHRUN_OPTIONS, str(REPO / "bench" / "_plain_ddp.py"), str(a.steps)]
        records = _run(with_python(plain_ddp, sys.executable))
        plain.append(float(records[-1]["steps_per_sec"]))

    for r in range(a.rounds):
        first, second = (run_core, run_plain) if r % 2 == 0 else (run_plain, run_core)
        first()
        second()
        print(f"round {r + 1}: training.ddp {core[-1]:.1f} steps/s, plain DDP {plain[-1]:.1f} steps/s", flush=True)
    ratios = sorted(c / b for c, b in zip(core, plain))
    print(f"throughput ratio training.ddp / plain DDP: median {statistics.median(ratios):.3f} "
          f"(rounds {ratios[0]:.3f}..{ratios[-1]:.3f}; goal >= 0.97)")

    # Checkpoints: the writer thread's time per save, and what saving every 10 steps costs the
    # training loop itself (steps/s with saves against the no-checkpoint runs above).
    with_saves, saves = [], []
    for _ in range(a.rounds):
        with tempfile.TemporaryDirectory() as d:
            records = ours(a.steps, ckpt_dir=d, ckpt_every=10)
        with_saves.append(float(rank0_done(records)["steps_per_sec"]))
        saves += [float(r["seconds"]) for r in records if r.get("event") == "checkpoint_saved"]
    step_seconds = 1.0 / statistics.median(core)
    save = statistics.median(saves)
    print(f"checkpoint save (writer thread): {save * 1000:.1f} ms median over {len(saves)} saves = "
          f"{save / step_seconds:.2f} x one step ({step_seconds * 1000:.2f} ms)")
    print(f"training throughput with a save every 10 steps / without: "
          f"{statistics.median(with_saves) / statistics.median(core):.3f}")

if __name__ == "__main__":
    main()
