"""Data-parallel training on N workers, launched by torchrun (or as one plain process).

    torchrun --nproc-per-node 2 -m training.ddp --steps 40 --ckpt-dir DIR --ckpt-every 5

Rank and peers come from the env torchrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); on
Kubeflow Trainer torchrun itself is configured by the PET_* variables the controller injects.
Every step every rank prints `step=N loss=X rank=R world=W`; the loss is all-reduced, so all ranks
print the same number. With --ckpt-dir the run resumes from the newest valid checkpoint there and
rank 0 writes metrics.json at the end. When a peer dies (a collective fails) or SIGTERM arrives,
a survivor saves the newest complete step before it exits (1 after a peer failure, 143 on SIGTERM),
so the restarted group loses no step. `--model-size 1gb` trains ~1 GB of state instead of 0.9 MB.
`--device` (auto: the GPU of LOCAL_RANK over NCCL where CUDA is, else the CPU over gloo) is decided
by training.device before anything is built; a device this machine cannot give is one line, exit 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import NoReturn

from training import device, metrics, process_start, run_record
from training.options import (
    EXIT_USAGE,
    OneLineParser,
    add_train_options,
    check_train_options,
    require_writable,
    train_config,
)

EXIT_PEER_FAILURE = 1
EXIT_TERMINATED = 128 + signal.SIGTERM  # as a shell reports a SIGTERM


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineParser("training.ddp", __doc__)
    p.add_argument("--ckpt-dir", type=Path, help="checkpoint directory, usually on the shared volume")
    p.add_argument("--memory-dir", type=Path,
                   help="this job's directory in the node's memory (a tmpfs kept across the group's "
                        "recreation): a survivor saves there and the next group loads from it "
                        "(training/memory_tier.py); needs --ckpt-dir")
    add_train_options(p)
    args = p.parse_args(argv)
    check_train_options(p, args)
    if args.ckpt_dir is not None:
        require_writable(p, args.ckpt_dir, "--ckpt-dir")
    if args.memory_dir is not None and args.ckpt_dir is None:
        p.error("--memory-dir needs --ckpt-dir: the volume is the durable copy")
    return args


def _init_process_group(backend: str, timeout: float):
    """`timeout`: what each collective waits for a peer (--collective-timeout) before it fails."""
    from datetime import timedelta

    import torch.distributed as dist

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        # env:// — what torchrun (and Kubeflow Trainer) give
        if os.environ["RANK"] != "0" and "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
            _wait_for_store(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), timeout)
        if _rank_zero_hosts_store():
            store = _rendezvous_store(timedelta(seconds=timeout))
            dist.init_process_group(backend, store=store, rank=int(os.environ["RANK"]),
                                    world_size=int(os.environ["WORLD_SIZE"]), timeout=timedelta(seconds=timeout))
        else:
            dist.init_process_group(backend, timeout=timedelta(seconds=timeout))
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                timeout=timedelta(seconds=timeout))
    return dist.get_rank(), dist.get_world_size()


def _rank_zero_hosts_store() -> bool:
    """True where rank 0 hosts the rendezvous store (a plain env:// launch, or torchrun without
    its agent's store); torchrun's agent store is the agent's to bind."""
    return ("MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ
            and os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "False") != "True")


def _rendezvous_store(timeout):
    """The store env:// would build (torch/distributed/rendezvous.py `_create_c10d_store`: rank 0
    hosts a multi-tenant TCPStore, the others connect; init_process_group prefixes it
    "default_pg"), except that rank 0's server listens only where its peers dial (training/listen.py
    says why): torch binds every interface unless handed a listening socket."""
    import torch.distributed as dist

    from training.listen import listen_where_dialled

    addr, port, world = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), int(os.environ["WORLD_SIZE"])
    use_libuv = os.environ.get("USE_LIBUV", "1") == "1"
    listener = listen_where_dialled(addr, port, backlog=4096) if os.environ["RANK"] == "0" else None
    try:
        store = dist.TCPStore(addr, port, world, is_master=listener is not None, timeout=timeout,
                              multi_tenant=True, use_libuv=use_libuv,
                              master_listen_fd=listener.fileno() if listener else None)
    except BaseException:
        if listener is not None:
            listener.close()
        raise
    if listener is not None:
        listener.detach()  # the store's server owns the descriptor now
    return dist.PrefixStore("default_pg", store)


def _wait_for_store(host: str, port: int, timeout: float, every: float = 0.01) -> None:
    """Return once rank 0's rendezvous store accepts a connection (or after `timeout`; then
    init_process_group says what is wrong). A rank that reaches the store before rank 0 listens
    is refused, and torch's TCPStore client then backs off for up to a second before it tries
    again: measured here, rank 1 joined 0.46-0.9 s after rank 0 was up, every restart of a group
    whose rank 0 came up second (both start together). Probing every 10 ms, it joins within 25 ms."""
    import socket
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=every * 10).close()
            return
        except OSError:
            time.sleep(every)


def train(args: argparse.Namespace, keep_alive: list) -> int:
    """Join the group, train, write metrics.json; the exit code. Objects that hold the process
    group go into `keep_alive`, so nothing frees them before the process leaves (see main)."""
    import torch

    from training.checkpoint import FileCheckpoints
    from training.exit_save import PeerLost
    from training.loop import ConfigError, PeerFailure, StopRequested, emit, run

    torch.set_num_threads(args.threads)
    cfg = train_config(args)
    try:
        placement = device.decide(args.device, args.backend, device.local_rank(), device.Cuda.here())
    except device.DeviceError as exc:
        sys.stderr.write(f"training.ddp: error: {exc}\n")
        return EXIT_USAGE
    device.apply(placement)
    if placement.note and device.local_rank() == 0:  # said once per pod, not by each of its ranks
        sys.stderr.write(f"training.ddp: {placement.note}\n")
    # The store before the group: its newest checkpoint is read while the peers' processes start
    # (RANK is the rank env:// init gives this process).
    store = (FileCheckpoints(args.ckpt_dir, cfg.keep, int(os.environ.get("RANK", "0")), memory=args.memory_dir)
             if args.ckpt_dir else None)
    if store is not None:
        store.prefetch()
    rank, world = _init_process_group(placement.backend, args.collective_timeout)
    # From here SIGTERM (torchrun or the platform tearing the group down) only raises a flag: the
    # loop saves the newest complete step at once, beside the step in flight (never halfway through
    # an optimizer update), and leaves (training/exit_save.py). Before, it ends the process as usual
    # (nothing to save while the group forms).
    terminated = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: terminated.set())
    peers = _watch_peers(rank, world)
    if args.ckpt_dir is not None:
        run_record.start(args.ckpt_dir, rank)
    began = process_start.started_at()  # before the group formed: the restart breakdown's point
    emit(event="start", rank=rank, world=world, pid=os.getpid(), steps=cfg.steps,
         restart=os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"), device=placement.device,
         backend=placement.backend, precision=cfg.precision,
         **({"process_started": round(began, 3)} if began is not None else {}),
         # Where this rank sits: its pod (torchrun's node rank), its place among the pod's ranks,
         # and its GPU. torchrun's env; a plain process is the one rank of its node.
         node_rank=os.environ.get("GROUP_RANK", "0"), local_rank=device.local_rank(),
         local_world=os.environ.get("LOCAL_WORLD_SIZE", "1"),
         **({"gpu": placement.gpu} if placement.gpu is not None else {}))
    try:
        training = run(cfg, rank, world, store, stop=terminated, placement=placement,
                       exit_on_stop=lambda: _leave(EXIT_TERMINATED),
                       peers=peers, exit_on_peer_lost=lambda: _peer_lost(rank, peers))
    except ConfigError as exc:  # a configuration that only fails once the world size is known
        sys.stderr.write(f"training.ddp: error: {exc}\n")
        return EXIT_USAGE
    except (PeerFailure, PeerLost) as exc:  # PeerLost: the training thread got there before the watch's exit
        sys.stderr.write(f"training.ddp: rank {rank}: {exc}\n")
        return EXIT_PEER_FAILURE
    except StopRequested:
        return EXIT_TERMINATED
    keep_alive.append(training)
    if store is not None:
        store.drop_memory()
    if rank == 0 and args.ckpt_dir is not None:
        metrics.write_json(args.ckpt_dir / metrics.FILE_NAME, training.final_metrics("torchrun"))
    return 0


def _watch_peers(rank: int, world: int):
    """training.peer_watch over the group's rendezvous store (torch's own, kept by the default
    group): a dead peer's save starts when its process goes, not a step later."""
    import torch.distributed as dist

    from training.peer_watch import PeerWatch, master_addr

    return PeerWatch.start(rank, world, dist.distributed_c10d._get_default_store(), master_addr())


def _peer_lost(rank: int, peers) -> NoReturn:
    sys.stderr.write(f"training.ddp: rank {rank}: rank {peers.lost_rank}'s process is gone "
                     "(its peer-watch connection closed); the newest complete step is saved\n")
    _leave(EXIT_PEER_FAILURE)


def main(argv: list[str] | None = None) -> NoReturn:
    args = parse_args(argv)
    keep_alive: list = []
    code = 1
    try:
        code = train(args, keep_alive)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 - printed, then the exit code below
        traceback.print_exc()
    finally:
        # Leave without interpreter teardown. Freeing DDP's reducer drops the last reference to
        # the gloo process group, whose destructor joins gloo's worker thread while holding the
        # GIL; if that thread is still releasing a finished work item, it waits for the GIL and
        # both hang (seen here: rank 0 stuck for good after event=done). Output is flushed and
        # files are fsynced by now; the OS closes the sockets.
        _leave(code)


def _leave(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
