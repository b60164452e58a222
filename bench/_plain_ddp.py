"""Baseline for bench/ddp_overhead.py: the same model and batch size in the plainest DDP loop
(no logging, no loss all-reduce, no checkpoints, no sampler bookkeeping). Run under torchrun."""

import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from training.loop import TrainConfig, build_model, make_dataset

steps = int(sys.argv[1])
torch.set_num_threads(1)
dist.init_process_group("gloo")
cfg = TrainConfig()
x, y = make_dataset(cfg).tensors
model = DistributedDataParallel(build_model(cfg))
opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
g = torch.Generator().manual_seed(dist.get_rank())
batches = [torch.randint(0, cfg.samples, (cfg.batch_size,), generator=g) for _ in range(steps)]
dist.barrier()
for n, idx in enumerate(batches):
    opt.zero_grad(set_to_none=True)
    F.mse_loss(model(x[idx]), y[idx]).backward()
    opt.step()
    if n == 0:  # steady state from after the first step, as training.ddp reports it
        started = time.perf_counter()
seconds = time.perf_counter() - started
if dist.get_rank() == 0:
    print(f"steps_per_sec={(steps - 1) / seconds:.3f}", flush=True)
dist.destroy_process_group()
