"""Checkpoint formats at the ~1 GB preset: plain torch.save (this project's) against DCP async_save.

One worker process (world 1, one torch thread, as a pod runs it) trains the `--model-size 1gb`
model and saves its state both ways, alternating (ABAB, so drift hits both alike). For each save:

- stall: how much longer the training loop took over the save than a step without one (the
  save call plus the next step, minus the median plain step);
- save: from the save call until the checkpoint is durable on disk (fsynced);
- load: from the file to the state back in the model and optimizer (checksum included for
  torch.save; DCP loads in place into the live tensors).

Prints medians in seconds and each as a ratio to the plain step and to the other format.

    .venv/bin/python bench/checkpoint_format.py [--rounds 2] [--model-size 1gb]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402

from training.checkpoint import FileCheckpoints, load_state, newest_valid  # noqa: E402
from training.loop import Training  # noqa: E402
from training.options import MODEL_SIZES, TrainConfig  # noqa: E402


def timed_step(training: Training, before_update=None) -> float:
    started = time.perf_counter()
    training.train_step(before_update)
    return time.perf_counter() - started


def torch_save_round(training: Training, directory: Path) -> dict[str, float]:
    store = FileCheckpoints(directory, keep=2, rank=0)
    started = time.perf_counter()
    store.save(training.state())
    called = time.perf_counter() - started
    step = timed_step(training, store.before_update)
    store.wait()
    saved = time.perf_counter() - started
    started = time.perf_counter()
    training.load(load_state(newest_valid(directory, 0)))
    return {"loop": called + step, "save": saved, "load": time.perf_counter() - started}


def dcp_round(training: Training, directory: Path) -> dict[str, float]:
    started = time.perf_counter()
    future = dcp.async_save(training.state(), checkpoint_id=directory)
    called = time.perf_counter() - started
    step = timed_step(training)
    future.result()
    saved = time.perf_counter() - started
    started = time.perf_counter()
    state = training.state()
    dcp.load(state, checkpoint_id=directory)  # in place into the live tensors
    training.load(state)
    return {"loop": called + step, "save": saved, "load": time.perf_counter() - started}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--model-size", choices=sorted(MODEL_SIZES), default="1gb")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    cfg = TrainConfig(model_size=args.model_size, hidden=MODEL_SIZES[args.model_size])
    training = Training(cfg, 0, 1)
    plain = [timed_step(training) for _ in range(4)][1:]  # the first sets up DDP's buckets
    state_bytes = sum(t.numel() * t.element_size() for t in training.module.parameters()) * 3
    rounds: dict[str, list[dict[str, float]]] = {"torch.save": [], "dcp": []}
    root = Path(tempfile.mkdtemp(prefix="ckpt-bench-", dir=os.environ.get("BENCH_DIR")))
    try:
        for i in range(args.rounds):
            for name, fn in (("torch.save", torch_save_round), ("dcp", dcp_round)):
                rounds[name].append(fn(training, root / f"{name}-{i}"))
                plain.append(timed_step(training))
            sizes = {n: sum(f.stat().st_size for f in (root / f"{n}-{i}").rglob("*") if f.is_file())
                     for n in rounds}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    step = statistics.median(plain)
    print(f"model {args.model_size}: training state {state_bytes / 1e9:.2f} GB, "
          f"plain step {step:.3f} s (median of {len(plain)}), {args.rounds} rounds each")
    print(f"files: torch.save {sizes['torch.save'] / 1e9:.2f} GB, dcp {sizes['dcp'] / 1e9:.2f} GB")
    medians = {n: {k: statistics.median(r[k] for r in rs) for k in ("loop", "save", "load")}
               for n, rs in rounds.items()}
    print(f"{'':12}{'stall s':>9}{'stall/step':>11}{'save s':>8}{'save/step':>10}{'load s':>8}")
    for name, m in medians.items():
        stall = max(0.0, m["loop"] - step)
        print(f"{name:12}{stall:9.3f}{stall / step:11.2f}{m['save']:8.2f}{m['save'] / step:10.2f}"
              f"{m['load']:8.2f}")
    a, b = medians["torch.save"], medians["dcp"]
    print(f"torch.save / dcp: save {a['save'] / b['save']:.2f}, load {a['load'] / b['load']:.2f}, "
          f"loop over a save {a['loop'] / b['loop']:.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
