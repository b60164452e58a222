"""Data-parallel training on N workers, launched by torchrun (or as one plain process).

    torchrun --nproc-per-node 2 -m training.ddp --steps 40 --ckpt-dir DIR --ckpt-every 5

Rank and peers come from the env torchrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); on
Kubeflow Trainer torchrun itself is configured by the PET_* variables the controller injects.
Every step every rank prints `step=N loss=X rank=R world=W`; the loss is all-reduced, so all ranks
print the same number. With --ckpt-dir the run resumes from the newest valid checkpoint there and
rank 0 writes metrics.json at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from training import metrics
from training.loop import TrainConfig

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one clear line, not usage + message
        sys.stderr.write(f"training.ddp: error: {message}\n")
        sys.exit(EXIT_USAGE)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = TrainConfig()
    p = _Parser(prog="training.ddp", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=d.steps, help="optimizer steps in total (default %(default)s)")
    p.add_argument("--ckpt-dir", type=Path, help="checkpoint directory, usually on the shared volume")
    p.add_argument("--ckpt-every", type=int, default=d.ckpt_every, help="save every N steps (default %(default)s)")
    p.add_argument("--keep", type=int, default=d.keep, help="checkpoints kept (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="samples per worker per step")
    p.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of data and initial weights")
    p.add_argument("--hidden", type=int, default=d.hidden, help="hidden width of the MLP")
    p.add_argument("--samples", type=int, default=d.samples, help="size of the synthetic data set")
    p.add_argument("--step-delay", type=float, default=d.step_delay,
                   help="seconds to pause after each step, to pace a demo (default 0)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per worker (default 1)")
    args = p.parse_args(argv)
    for name in ("steps", "ckpt_every", "keep", "batch_size", "hidden", "samples", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.lr <= 0:
        p.error(f"--lr must be positive, got {args.lr}")
    if args.step_delay < 0:
        p.error(f"--step-delay must not be negative, got {args.step_delay}")
    if args.ckpt_dir is not None:
        problem = _unwritable(args.ckpt_dir)
        if problem:
            p.error(f"cannot write to --ckpt-dir {args.ckpt_dir}: {problem}")
    return args


def _unwritable(directory: Path) -> str:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def _init_process_group():
    import torch
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend)  # env:// — what torchrun (and Kubeflow Trainer) give
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    return dist.get_rank(), dist.get_world_size()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    from training.checkpoint import FileCheckpoints, NoCheckpoints
    from training.loop import ConfigError, emit, run

    torch.set_num_threads(args.threads)
    cfg = TrainConfig(
        steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
        hidden=args.hidden, samples=args.samples, ckpt_every=args.ckpt_every,
        keep=args.keep, step_delay=args.step_delay,
    )
    rank, world = _init_process_group()
    try:
        emit(event="start", rank=rank, world=world, pid=os.getpid(), steps=cfg.steps,
             restart=os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        store = FileCheckpoints(args.ckpt_dir, cfg.keep, rank) if args.ckpt_dir else NoCheckpoints()
        try:
            training = run(cfg, rank, world, store)
        except ConfigError as exc:  # a configuration that only fails once the world size is known
            sys.stderr.write(f"training.ddp: error: {exc}\n")
            return EXIT_USAGE
        if rank == 0 and args.ckpt_dir is not None:
            metrics.write_atomic(args.ckpt_dir / metrics.FILE_NAME, {
                "final_loss": training.loss_history[-1],
                "steps": training.steps_done,
                "world_size": world,
                "wall_seconds": round(time.time() - training.first_started_at, 3),
                "resumes": training.resumes,
                "params_sha256": training.params_digest(),
                "loss_history": training.loss_history,
                "launcher": "torchrun",
            })
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
