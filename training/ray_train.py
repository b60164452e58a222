"""The training loop of `loop.py` on N Ray workers, under Ray Train's TorchTrainer.

    python -m training.ray_train --num-workers 2 --steps 40 --storage DIR [--name RUN] ...

The same model, data and step as `training.ddp` (shared through `training.loop`), so every worker
prints the same `step=N loss=X rank=R world=W` lines and the cockpit reads them unchanged. What
differs is who launches and restarts the workers: here the Python driver does, through Ray —
`ScalingConfig(num_workers=N, use_gpu=...)`, `FailureConfig(max_failures=K)`, checkpoints handed to
`ray.train.report(..., checkpoint=...)` and resumed from `ray.train.get_checkpoint()`. --device
asks Ray for a GPU per worker (auto: when the Ray cluster has one for each; training.device decides)
and each worker trains on the device Ray assigns it (`ray.train.torch.get_device()`).

The driver starts a private Ray for the run on 127.0.0.1 only (no dashboard, no usage stats), keeps
its temp files in --temp-dir (default: $RAY_TMPDIR, Ray's own variable, else a fresh directory),
and shuts it down at the end. Submitted as a Ray job (RAY_ADDRESS set, e.g. by KubeRay's RayJob)
it joins that cluster instead. Each run gets a fresh name: Ray Train
silently resumes a run whose name it finds in the storage, so reusing one is refused.

On the storage, under <storage>/<run>/:
    ckpt-step-000015/ckpt-step-000015.pt   the checkpoint in training.checkpoint_format: a plain
    ckpt-step-000015/ckpt-step-000015.json torch.save file and its JSON sidecar
    ckpt-step-000017/...                   a survivor's save (below), same layout, not Ray's
    reports.jsonl                          what every worker passed to each ray.train.report
    metrics.json                           written by rank 0 at the end (launcher "ray")

Survivor saves, as with torchrun: when a worker dies, Ray Train's controller notices at its next
poll and tears the group down, calling each worker actor's `shutdown` and then `ray.kill`ing it
(a forced exit: no SIGTERM, no atexit) once those calls return or after 5 s (`_shutdown_workers`,
ray/train/v2/_internal/execution/worker_group/state.py). `shutdown` only runs the workers'
`before_worker_shutdown` callbacks and returns, so without help a survivor lives about one poll
interval after the kill. `SurvivorSave` is such a callback: it asks the loop to stop (as SIGTERM
does under torchrun) and holds the teardown until the loop has left, by a save of the newest
complete step or a failed collective's, at most Ray's 5 s. A loop waiting in `ray.train.report`
(a barrier the dead worker never reaches) cannot leave: the callback saves its step for it. A save
cannot go through `ray.train.report` either, so it is written straight into the run's directory
in Ray's layout, and a new group's rank 0 resumes from the newest valid of Ray's latest checkpoint
and such saves; a survivor save is removed once a newer checkpoint is reported. The one case with
no save: a loop that does not reach a step boundary or a failed collective within Ray's patience
(a step, or a save, slower than about 4.5 s; a --step-delay pause ends at the stop); its group
resumes from the last reported checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from training import device, metrics, run_record
from training.ray_checkpoints import RayCheckpoints
from training.options import (
    EXIT_USAGE,
    OneLineParser,
    add_train_options,
    check_train_options,
    require_writable,
    train_config,
)
EXIT_FAILED = 1
EXIT_TERMINATED = 128 + 15  # SIGTERM, as a shell reports it
REPORTS_FILE = "reports.jsonl"

# Set before ray is imported (some are read at import) and inherited by every Ray process.
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # node address = loopback, never a public interface
    "RAY_AUTH_MODE": "disabled",  # a throwaway cluster on loopback: no token files
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_TRAIN_ENABLE_PRINT_PATCH": "0",  # otherwise each print is doubled through a logger
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",  # controller poll: start, reports, death detection
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",  # no spot nodes here; one actor fewer to start
    "RAY_TRAIN_METRICS_ENABLED": "0",  # Prometheus metrics, which nothing scrapes here
    "RAY_DEDUP_LOGS": "0",  # the ranks' lines differ only in numbers; Ray would fold them
    "RAY_DISABLE_WORKER_LOG_PREFIX": "1",  # forward worker lines as printed: plain logfmt
    "RAY_COLOR_PREFIX": "0",
    # Ray starts its workers at nice 15: on a busy machine its actors (Ray Train's controller and
    # the training workers, which are this job's pods) then get a sliver of what a TrainJob's pods
    # get, and start-up and restarts took minutes. Ray's own job supervisor sets it back to 0 too.
    "RAY_worker_niceness": "0",
    # The idle workers Ray starts for the first driver are never used here (every Ray Train actor
    # has a runtime env of its own, so it gets a new worker) and cost CPU while the group starts.
    "RAY_prestart_worker_first_driver": "0",
}

# Ray names its socket files <temp-dir>/session_<date>_<time>_<usec>_<pid>/sockets/plasma_store
# and a Unix socket path holds at most 107 bytes.
_SOCKET_SUFFIX = "/session_2000-01-01_00-00-00_000000_4194304/sockets/plasma_store"
MAX_TEMP_DIR = 107 - len(_SOCKET_SUFFIX)
DEFAULT_NUM_WORKERS = 2
DEFAULT_MAX_FAILURES = 3
# Ray kills a worker 5 s after asking it to shut down (_shutdown_workers' patience): a survivor's
# save must end before then, or it is lost half written (and never chosen: no sidecar).
SHUTDOWN_PATIENCE_S = 5.0
GROUP_HELPER_ACTORS = 2  # processes Ray Train starts with every worker group besides its workers

def new_run_name() -> str:
    return time.strftime("ray-%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineParser("training.ray_train", __doc__)
    p.add_argument("--num-workers", type=int, default=DEFAULT_NUM_WORKERS, help="Ray workers (default %(default)s)")
    p.add_argument("--storage", type=Path, required=True,
                   help="where runs keep checkpoints and metrics, usually the shared volume")
    p.add_argument("--name", help="run name, new per run (default: ray-<date>-<time>-<random>)")
    p.add_argument("--max-failures", type=int, default=DEFAULT_MAX_FAILURES,
                   help="worker-group restarts Ray may make (default %(default)s)")
    p.add_argument("--temp-dir", type=Path,
                   help=f"Ray's temp files and logs (absolute, at most {MAX_TEMP_DIR} characters; "
                        "default: $RAY_TMPDIR if set, else a fresh directory removed at the end)")
    p.add_argument("--report-every", type=int,
                   help="ray.train.report every N steps, besides every checkpoint (default: --ckpt-every)")
    add_train_options(p)
    args = p.parse_args(argv)
    if args.report_every is None:
        args.report_every = args.ckpt_every
    check_train_options(p, args, also_at_least_one=("num_workers", "report_every"))
    if args.max_failures < -1:
        p.error(f"--max-failures must be -1 (no limit) or more, got {args.max_failures}")
    args.name = args.name or new_run_name()
    if not args.name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        p.error(f"--name {args.name!r} may hold only letters, digits, '-', '_' and '.'")
    require_writable(p, args.storage, "--storage")
    args.storage = args.storage.resolve()
    if (args.storage / args.name).exists():
        p.error(f"run {args.name!r} already exists in {args.storage} (Ray Train would resume it); "
                "choose another --name")
    option = "--temp-dir"
    if args.temp_dir is None and os.environ.get("RAY_TMPDIR") and not os.environ.get("RAY_ADDRESS"):
        args.temp_dir, option = Path(os.environ["RAY_TMPDIR"]), "RAY_TMPDIR"
    if args.temp_dir is not None:
        if not args.temp_dir.is_absolute():
            p.error(f"{option} must be an absolute path, got {args.temp_dir}")
        if len(str(args.temp_dir)) > MAX_TEMP_DIR:
            p.error(f"{option} {args.temp_dir} is {len(str(args.temp_dir))} characters; Ray's "
                    f"socket paths allow at most {MAX_TEMP_DIR}")
        require_writable(p, args.temp_dir, option)
    return args


# ---------------------------------------------------------------- inside each Ray worker


class _Worker:
    """This worker process's loop, as the shutdown callback sees it (one group per process)."""

    stop = threading.Event()  # the group is being torn down: stop at the next step boundary
    left = threading.Event()  # the loop has returned or raised (after any survivor save)
    done = threading.Event()  # the loop trained to the end: nothing to save at teardown
    store: RayCheckpoints | None = None


def _survivor_save_callback():
    """A WorkerCallback (see the module's docstring). Ray's RunConfig takes callbacks other than
    UserCallbacks as they are ("custom workarounds built on top of internal callbacks")."""
    from ray.train.v2._internal.execution.callback import WorkerCallback

    class SurvivorSave(WorkerCallback):
        def before_worker_shutdown(self):
            from training.loop import emit

            _Worker.stop.set()
            store = _Worker.store
            if store is None or _Worker.done.is_set():
                return  # never started, or trained to the end
            began = time.perf_counter()
            # Said even when the loop left before Ray came (its collective failed first): every
            # teardown of a failed group says whether it ended with the survivor's loop gone.
            saved_for_it = not _Worker.left.is_set() and store.save_in_report()
            if not saved_for_it:
                _Worker.left.wait(SHUTDOWN_PATIENCE_S - 0.5)
            emit(event="shutdown_hold", rank=store.rank, seconds=time.perf_counter() - began,
                 left=_Worker.left.is_set(), saved_in_report=saved_for_it)

    return SurvivorSave()


def train_per_worker(config: dict) -> None:
    """What every Ray worker runs; a new worker group after a failure runs it again."""
    import ray.train
    import ray.train.torch
    import torch
    import torch.distributed as dist

    from training.loop import TrainConfig, emit, run

    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    torch.set_num_threads(config["threads"])
    cfg = TrainConfig(**config["train"])
    # Ray chose the device (use_gpu) and the backend (TorchConfig) and set up the group on them.
    placement = device.Placement(str(ray.train.torch.get_device()), dist.get_backend())
    device.apply(placement)
    run_dir = Path(config["run_dir"])
    run_record.start(run_dir, rank)
    emit(event="start", rank=rank, world=world, pid=os.getpid(), steps=cfg.steps, launcher="ray",
         device=placement.device, backend=placement.backend, precision=cfg.precision)
    _Worker.stop.clear()
    _Worker.left.clear()
    _Worker.done.clear()
    store = _Worker.store = RayCheckpoints(rank, world, config["report_every"], Path(config["staging"]), run_dir)
    try:
        training = run(cfg, rank, world, store, on_step=store.report_step, stop=_Worker.stop,
                       placement=placement)
        _Worker.done.set()
    finally:
        _Worker.left.set()
    if rank == 0:
        metrics.write_json(run_dir / metrics.FILE_NAME, training.final_metrics("ray"))


# ---------------------------------------------------------------- in the Ray Train controller


def _report_log_callback(path: Path):
    """A UserCallback appending what all workers reported (and worker errors) to reports.jsonl.

    It runs in the controller, which sees every worker's metrics (Result keeps only rank 0's)."""
    from ray.train import UserCallback

    class ReportLog(UserCallback):
        def _append(self, record: dict) -> None:
            with open(path, "a") as f:
                f.write(json.dumps(dict(record, time=time.time())) + "\n")

        def after_report(self, run_context, metrics, checkpoint):
            self._append({"metrics": metrics, "checkpoint": checkpoint.path if checkpoint else None})

        def after_exception(self, run_context, worker_exceptions):
            self._append({"errors": {str(rank): _one_line(exc) for rank, exc in worker_exceptions.items()}})

    return ReportLog()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"


# ---------------------------------------------------------------- the driver


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = train_config(args)
    from training.loop import BatchPlan, ConfigError, emit, make_dataset

    try:  # fail here, once, not in every worker and again on every restart
        BatchPlan(make_dataset(cfg), cfg, 0, args.num_workers)
    except ConfigError as exc:
        sys.stderr.write(f"training.ray_train: error: {exc}\n")
        return EXIT_USAGE
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    # Ray starts at most as many worker processes at once as the node has CPUs (num_cpus: one per
    # training worker), but a group is those workers plus Ray Train's SynchronizationActor and
    # DatasetManager: the last ones waited for a slot, one process start-up each (16 s under load).
    os.environ.setdefault("RAY_worker_maximum_startup_concurrency", str(args.num_workers + GROUP_HELPER_ACTORS))

    owned_temp = args.temp_dir is None  # ours to remove: neither given nor inherited (RAY_TMPDIR)
    temp_dir = Path(tempfile.mkdtemp(prefix="kfc-ray-")) if args.temp_dir is None else args.temp_dir
    run_dir = args.storage / args.name
    started = time.time()
    import ray

    terminated = []

    def on_sigterm(*_) -> None:
        terminated.append(True)
        sys.exit(EXIT_TERMINATED)

    try:
        if os.environ.get("RAY_ADDRESS"):  # a submitted Ray job: the cluster is given
            ray.init(log_to_driver=True, logging_level="WARNING")
        else:
            ray.init(address="local", num_cpus=args.num_workers, include_dashboard=False,
                     _temp_dir=str(temp_dir), object_store_memory=80 * 1024 * 1024,
                     log_to_driver=True, logging_level="WARNING")
        # SIGTERM (a stopped job) unwinds like Ctrl-C, so the `finally` below shuts Ray down.
        # Set after ray.init, whose crash handler would otherwise turn it into an abort.
        signal.signal(signal.SIGTERM, on_sigterm)
        emit(event="ray_started", seconds=time.time() - started, node=ray.util.get_node_ip_address(),
             temp_dir=temp_dir, name=args.name, storage=args.storage)
        try:
            use_gpu, backend = device.ray_scaling(args.device, args.backend,
                                                  ray.cluster_resources().get("GPU", 0), args.num_workers)
        except device.DeviceError as exc:
            sys.stderr.write(f"training.ray_train: error: {exc}\n")
            return EXIT_USAGE
        return _fit(args, cfg, run_dir, temp_dir, use_gpu, backend)
    except SystemExit:
        if not terminated:
            raise
        emit(event="stopped", name=args.name, reason="SIGTERM")  # ray.get re-raises it as exit 1
        return EXIT_TERMINATED
    finally:
        ray.shutdown()
        if owned_temp:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _fit(args: argparse.Namespace, cfg, run_dir: Path, temp_dir: Path, use_gpu: bool, backend: str) -> int:
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from training import ray_train  # by module name, so Ray pickles a reference, not __main__
    from training.loop import emit

    staging = temp_dir / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True)
    trainer = TorchTrainer(
        ray_train.train_per_worker,
        train_loop_config={"train": asdict(cfg), "threads": args.threads,
                           "report_every": args.report_every, "run_dir": str(run_dir),
                           "staging": str(staging)},
        scaling_config=ScalingConfig(num_workers=args.num_workers, use_gpu=use_gpu),
        torch_config=TorchConfig(backend=backend, timeout_s=int(args.collective_timeout)),
        run_config=RunConfig(
            name=args.name,
            storage_path=str(args.storage),
            failure_config=FailureConfig(max_failures=args.max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=cfg.keep),
            callbacks=[ray_train._report_log_callback(run_dir / REPORTS_FILE),
                       ray_train._survivor_save_callback()],
        ),
    )
    try:
        result = trainer.fit()
    except Exception as exc:  # noqa: BLE001 - TrainingFailedError: out of restarts, or the controller gave up
        emit(event="failed", name=args.name, reason=_one_line(exc))
        sys.stderr.write(f"training.ray_train: error: run {args.name} failed: {_one_line(exc)}\n")
        return EXIT_FAILED
    emit(event="finished", name=args.name, checkpoint=result.checkpoint.path if result.checkpoint else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
