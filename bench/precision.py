"""What `--precision bf16` (torch.autocast to bfloat16 in the forward pass) buys over fp32, measured in
one invocation on one device.

One rank of `training.ddp` per run (torchrun, no checkpoints), the same preset and steps both ways;
runs alternate in ABBA order so drift hits both alike, and medians are reported. Throughput is the
loop's steady state (its `event=done` steps_per_sec: from the end of the first step to the last).
Prints steps/s of each, the ratio bf16/fp32 (goal on a GPU: > 1; on a CPU it depends on the
processor's bf16 instructions), and the final loss of each, to show bf16 trains the same model
to nearly the same loss (not bitwise: the matmuls round differently).

    .venv/bin/python bench/precision.py [--device auto|cpu|cuda] [--model-size 1gb] [--steps 8] [--rounds 2]
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

from training.launch import ddp_command, with_python  # noqa: E402
from training.logfmt import parse_line  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


def measure(precision: str, a: argparse.Namespace) -> tuple[float, float, str]:
    """(steps/s, final loss, device) of one run."""
    args = ["--model-size", a.model_size, "--steps", str(a.steps), "--samples", "640", "--device", a.device,
            "--threads", str(a.threads), "--precision", precision]
    with tempfile.TemporaryFile("w+") as log:
        subprocess.run(with_python(ddp_command("--standalone", "--nproc-per-node=1", args=args), sys.executable),
                       cwd=REPO, env=ENV, stdout=log, stderr=subprocess.DEVNULL, text=True, check=True)
        log.seek(0)
        records = [parse_line(line) for line in log]
    start = next(r for r in records if r.get("event") == "start")
    done = next(r for r in records if r.get("event") == "done")
    return float(done["steps_per_sec"]), float(done["final_loss"]), start["device"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--model-size", default="1gb", choices=("tiny", "1gb"))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2, help="ABBA rounds (4 runs each)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads (CPU runs)")
    a = p.parse_args()

    speed: dict[str, list[float]] = {"fp32": [], "bf16": []}
    loss: dict[str, float] = {}
    device = ""
    for _ in range(a.rounds):
        for precision in ("fp32", "bf16", "bf16", "fp32"):
            steps_per_sec, loss[precision], device = measure(precision, a)
            speed[precision].append(steps_per_sec)
    fp32, bf16 = statistics.median(speed["fp32"]), statistics.median(speed["bf16"])
    print(f"{a.model_size} preset, one rank on {device} ({a.threads} threads), {a.steps} steps, "
          f"{len(speed['fp32'])} runs each, medians")
    print(f"  fp32  {fp32:8.2f} steps/s   final loss {loss['fp32']:.6f}")
    print(f"  bf16  {bf16:8.2f} steps/s   final loss {loss['bf16']:.6f}")
    print(f"  bf16 / fp32 = {bf16 / fp32:.2f}")


if __name__ == "__main__":
    main()
