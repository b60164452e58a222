"""The training loop shared by the torchrun launcher (`ddp.py`) and Ray Train (`ray_train.py`).

Everything that decides the numbers lives here, so both launchers train the same model on the same
data in the same order: a small MLP regressing a fixed "teacher" function of synthetic inputs made
from a seed. Data order is a pure function of (seed, world size, rank, step), which is what makes
resume exact: a run restored from step N replays steps N+1.. bit for bit.

The device is given (a `training.device.Placement`): the model, optimizer state and batches live
there and nothing below asks which device it is; data and initial weights are drawn on the CPU,
so every device starts from the same numbers. A checkpoint's tensors are saved on the CPU by the
store, whatever the device, and loaded back onto this one.
"""

from __future__ import annotations

import ctypes
import random
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict
from typing import Callable, ContextManager, Protocol

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler, TensorDataset

from training import run_record
from training.monitors import LoopMonitors
from training.device import Placement
from training.exit_save import ExitSave, StopRequested, abandon_step_on
from training.peer_watch import PeerWatch
from training.logfmt import format_line
from training.options import TrainConfig

try:  # not a torch dependency: a pod has it, a bare torch install (a GPU machine's) may not
    import numpy as np
except ImportError:
    np = None

CPU = Placement("cpu", "gloo")


def emit(**fields: object) -> None:
    """One logfmt line on stdout, flushed: the cockpit reads these as they happen; and in the run's
    record on its volume, which outlives the pods (training/run_record.py)."""
    line = format_line(**fields)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    run_record.write(line)


def build_model(cfg: TrainConfig, device: torch.device, initialise: bool = True) -> nn.Module:
    """The MLP on `device`, seeded: every rank builds the same weights, drawn on the CPU so every
    device gets the same ones. `initialise=False` leaves the parameters' memory unset, for a resume
    that overwrites them (at 1 GB the random init of weights about to be replaced costs seconds of
    recovery)."""
    torch.manual_seed(cfg.seed)
    with torch.device("cpu" if initialise else "meta"):
        model = nn.Sequential(
            nn.Linear(cfg.features, cfg.hidden),
            nn.Tanh(),
            nn.Linear(cfg.hidden, cfg.hidden),
            nn.Tanh(),
            nn.Linear(cfg.hidden, 1),
        )
    return model.to(device) if initialise else model.to_empty(device=device)


def make_dataset(cfg: TrainConfig) -> TensorDataset:
    g = torch.Generator().manual_seed(cfg.seed + 1)
    x = torch.randn(cfg.samples, cfg.features, generator=g)
    teacher = torch.randn(cfg.features, 1, generator=g) / cfg.features**0.5
    y = torch.tanh(2.0 * x @ teacher) + 0.05 * torch.randn(cfg.samples, 1, generator=g)
    return TensorDataset(x, y)


class ConfigError(ValueError):
    """A training configuration that cannot work (found once the world size is known)."""


class PeerFailure(Exception):
    """A collective of the step after `complete_step` failed: a peer is gone.

    Raised before the optimizer update, so model, optimizer and step counter still hold the
    state after `complete_step`, identical on every survivor: a checkpoint of it is exact."""

    def __init__(self, complete_step: int, cause: BaseException):
        first_line = (str(cause).splitlines() or [type(cause).__name__])[0]
        super().__init__(f"collective failed after step {complete_step}: {first_line}")
        self.complete_step = complete_step


class BatchPlan:
    """Which samples this rank trains on at a given step (DistributedSampler, epoch by epoch)."""

    def __init__(self, dataset: TensorDataset, cfg: TrainConfig, rank: int, world: int):
        self.sampler = DistributedSampler(
            dataset, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed, drop_last=True
        )
        self.batch = cfg.batch_size
        self.per_epoch = len(self.sampler) // cfg.batch_size
        if self.per_epoch == 0:
            raise ConfigError(
                f"--samples {cfg.samples} is too small for {world} worker(s) x batch {cfg.batch_size}"
            )
        self._epoch = -1
        self._order = torch.empty(0, dtype=torch.long)

    def position(self, step: int) -> tuple[int, int]:
        """(epoch, batch index within the epoch) of a 0-based global step."""
        return divmod(step, self.per_epoch)

    def indices(self, step: int) -> torch.Tensor:
        epoch, index = self.position(step)
        if epoch != self._epoch:
            self.sampler.set_epoch(epoch)
            self._order = torch.tensor(list(self.sampler))
            self._epoch = epoch
        return self._order[index * self.batch : (index + 1) * self.batch]


def rng_state() -> dict:
    # Lists and tensors only, so checkpoints load with torch.load(weights_only=True). The loop
    # draws from the CPU's generator alone (data order, initial weights), on any device.
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if np is not None:  # without numpy nothing here can have drawn from it
        np_state = np.random.get_state()
        state["numpy"] = [np_state[0], np_state[1].tolist(), *np_state[2:]]
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if np is not None and "numpy" in state:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


class Checkpoints(Protocol):
    """Where the loop's state goes and comes back from (files on a volume, or Ray's storage).

    A store may also have
    - `wait()`: block until saves in flight are durable (run() calls it before reporting done);
    - `before_update()`: block until a save in flight no longer needs the live tensors (run()
      calls it before each optimizer update, so a save copies while the next step computes);
    - `save_now(state, reason)`: a synchronous save by whichever rank is still alive, before
      it exits (a survivor's save after a peer failure, or at SIGTERM);
    - `save_final(state)`: `save` of the last step, after which no update changes the state."""

    def load_latest(self) -> dict | None: ...

    def save(self, state: dict) -> None: ...


class _LossCarrier(nn.Module):
    """The model plus one zero parameter whose gradient is set to this worker's loss.

    Printing the averaged loss needs a sum over workers every step. DDP already averages every
    gradient in one all-reduce, so a parameter whose gradient is the local loss comes back holding
    the mean loss: no second collective, which would cost as much as a small model's whole step.
    The carrier stays zero and outside the optimizer, so the model's gradients are untouched.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.carrier = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def loss(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = F.mse_loss(out, target)
        return loss + self.carrier * loss.detach()  # same value; d/d(carrier) = local loss


class Training:
    """Model, optimizer and data plan of one worker on its device, with the state a checkpoint holds."""

    def __init__(self, cfg: TrainConfig, rank: int, world: int, resume_from: dict | None = None,
                 placement: Placement = CPU):
        self.cfg, self.rank, self.world = cfg, rank, world
        self.placement = placement
        self.device = torch.device(placement.device)
        dataset = make_dataset(cfg)
        self.x, self.y = (t.to(self.device) for t in dataset.tensors)
        self.plan = BatchPlan(dataset, cfg, rank, world)
        self.module = build_model(cfg, self.device, initialise=resume_from is None)
        if resume_from is not None:
            # The checkpoint's tensors become the weights (on the CPU the very tensors read): no
            # second copy of them on a restart's path. Before DDP and the optimizer take the
            # parameters, which assigning replaces.
            self.module.load_state_dict({name: tensor.to(self.device) for name, tensor in resume_from["model"].items()},
                                        assign=True)
        self.carrier = _LossCarrier(self.module).to(self.device)
        # No broadcast of rank 0's weights at start (init_sync): every rank already holds the same
        # ones, seeded alike or loaded from the one checkpoint rank 0 chose. At 1 GB that
        # broadcast was the largest part of a restart's set-up (seconds per recovery).
        self.model = DistributedDataParallel(self.carrier, device_ids=placement.ddp_device_ids(),
                                             init_sync=False)
        # DDP puts every gradient in one bucket for a process's first step, then lays its buckets
        # out again in the order the gradients became ready; an all-reduce over more than two ranks
        # sums an element in an order that depends on where it sits in its bucket. So the first
        # step after a resume summed otherwise than the same step of an uninterrupted run (world 4
        # ended 1 ulp apart, measured). Laid out once, in parameter order, before the first step
        # (what DDP's join hook does for a joined rank), every step of every process sums alike.
        self.model.reducer._push_all_rebuilt_params()
        self.optimizer = torch.optim.Adam(self.module.parameters(), lr=cfg.lr)
        # When this rank's last gradient became ready in the current step: DDP starts the last
        # bucket's all-reduce there, so what the backward pass takes after it is the wait for the
        # slowest peer (a post-accumulate hook runs just before the reducer's own; one clock read
        # per parameter, the numbers untouched).
        self._grads_ready = 0.0
        for parameter in self.carrier.parameters():
            parameter.register_post_accumulate_grad_hook(self._grad_ready)
        self.last_compute = self.last_wait = 0.0  # of the newest step: see train_step
        self.steps_done = 0
        self.loss_history: list[float] = []
        self.first_started_at = time.time()
        self.resumes = 0
        if resume_from is not None:
            self.load(resume_from, weights=False)

    def train_step(self, before_update: Callable[[], None] | None = None,
                   updating: Callable[[], ContextManager[None]] = nullcontext) -> float:
        """One optimizer step; returns the loss averaged over all workers (same on every rank).

        `before_update` runs between the gradients and the update: the last moment the state of
        the previous step is still there (a checkpoint being copied waits for it). The update and
        the step counter run inside `updating()` (ExitSave.update: never while a save reads them).

        Sets `last_wait`, the seconds this rank waited in the step's collective for its peers, and
        `last_compute`, the rest of the step: in synchronous data parallelism every rank's step
        lasts as long as the slowest rank's, so only these tell a straggler (backend/stragglers.py).
        On a GPU they are the host's view (kernels queued, not finished)."""
        began = time.perf_counter()
        self._grads_ready = began
        idx = self.plan.indices(self.steps_done).to(self.device)
        self.optimizer.zero_grad(set_to_none=True)
        self.carrier.carrier.grad = None  # not in the optimizer: cleared by hand
        try:
            # bf16: the forward pass in bfloat16 where autocast deems it safe (the matmuls); the
            # weights, their gradients, the loss and Adam's state stay fp32.
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cfg.precision == "bf16"):
                loss = self.carrier.loss(self.model(self.x[idx]), self.y[idx])
            loss.backward()  # DDP all-reduces here
            reduced = time.perf_counter()
        except RuntimeError as exc:
            if self.world == 1:
                raise
            raise PeerFailure(self.steps_done, exc) from exc
        held = 0.0  # waiting for a checkpoint's copy: goodput's ckpt_wait, not this rank's compute
        with updating():
            if before_update is not None:
                held = time.perf_counter()
                before_update()
                held = time.perf_counter() - held
            self.optimizer.step()
            value = float(self.carrier.carrier.grad.item())  # the mean loss over all workers
            self.steps_done += 1
            self.loss_history.append(value)
        self.last_wait = max(0.0, reduced - self._grads_ready)
        self.last_compute = time.perf_counter() - began - self.last_wait - held
        return value

    def _grad_ready(self, _parameter: torch.Tensor) -> None:
        self._grads_ready = time.perf_counter()

    def state(self) -> dict:
        epoch, index = self.plan.position(self.steps_done)
        return {
            "step": self.steps_done,
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": rng_state(),
            "sampler": {"epoch": epoch, "index": index, "seed": self.cfg.seed},
            "world_size": self.world,
            "loss_history": list(self.loss_history),
            "first_started_at": self.first_started_at,
            "resumes": self.resumes,
            "config": asdict(self.cfg),
            "device": self.placement.device,  # of the writer; the tensors are saved on the CPU
        }

    def load(self, state: dict, weights: bool = True) -> None:
        """Restore `state` into this worker; `weights=False`: the model holds its weights already."""
        if weights:
            self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        self.steps_done = int(state["step"])
        self.loss_history = list(state["loss_history"])
        self.first_started_at = float(state["first_started_at"])
        self.resumes = int(state["resumes"]) + 1

    def final_metrics(self, launcher: str) -> dict:
        """What a finished run writes to metrics.json (training.metrics), for either launcher."""
        return {
            "final_loss": self.loss_history[-1],
            "steps": self.steps_done,
            "world_size": self.world,
            "wall_seconds": round(time.time() - self.first_started_at, 3),
            "resumes": self.resumes,
            "params_sha256": self.params_digest(),
            "loss_history": self.loss_history,
            "launcher": launcher,
        }

    def params_digest(self) -> str:
        """sha256 over the parameters' bytes: equal digests mean bitwise-equal models."""
        import hashlib

        h = hashlib.sha256()
        for name, tensor in sorted(self.module.state_dict().items()):
            h.update(name.encode())
            h.update(raw_bytes(tensor.detach().cpu().contiguous()))
        return h.hexdigest()


def raw_bytes(tensor: torch.Tensor) -> memoryview:
    """The memory of a contiguous CPU tensor, not copied (what numpy's tobytes() gives)."""
    size = tensor.numel() * tensor.element_size()
    return memoryview((ctypes.c_char * size).from_address(tensor.data_ptr())).cast("B")


def run(
    cfg: TrainConfig,
    rank: int,
    world: int,
    checkpoints: Checkpoints | None,
    on_step: Callable[[Training, float], None] | None = None,
    stop: threading.Event | None = None,
    placement: Placement = CPU,
    exit_on_stop: Callable[[], None] | None = None,
    peers: PeerWatch | None = None,
    exit_on_peer_lost: Callable[[], None] | None = None,
) -> Training:
    """Resume if a checkpoint exists, train to cfg.steps, checkpoint every cfg.ckpt_every steps.

    A failed collective (PeerFailure) or `stop` set (StopRequested, checked at each step
    boundary, and ending a --step-delay pause at once: the platform's grace period must not be
    spent asleep) first saves the newest complete step, so a restarted group loses no work.
    With `exit_on_stop`, a stop is saved at once, mid-step, and `exit_on_stop()` then ends the
    process (training/exit_save.py); with `peers` and `exit_on_peer_lost`, a peer's process gone
    the same (training/peer_watch.py), and `peers` hears this rank's goodbye when the loop ends.
    With no store (no volume) nothing is resumed or saved, and no state is built to be dropped.
    A checkpoint of another world size is refused (ConfigError) before anything is built."""
    restoring = time.perf_counter()
    state = checkpoints.load_latest() if checkpoints is not None else None
    if state is not None and int(state["world_size"]) != world:
        raise ConfigError(
            f"the newest checkpoint (step {state['step']}) was saved by {state['world_size']} worker(s), "
            f"this group has {world}: each rank's data depends on the world size, so it would not "
            "resume exactly; run with the same number of workers, or start afresh in a new checkpoint directory")
    training = Training(cfg, rank, world, resume_from=state, placement=placement)
    if state is not None:  # restore_seconds: goodput's checkpoint restore (backend/goodput)
        emit(event="resumed", from_step=training.steps_done, rank=rank, world=world,
             checkpoint_world=state["world_size"], restore_seconds=time.perf_counter() - restoring)
    del state  # copied into the model and optimizer: at 1 GB, not a second copy for the whole run
    # Seconds the loop waited on checkpoints since the last step line (handing a save over, the
    # store's hook, waiting for the copy before the next update), printed on the next step line as
    # ckpt_wait=S when a save happened, so goodput can tell checkpoint stalls from training.
    waited = [0.0]
    store_before_update = getattr(checkpoints, "before_update", None)
    before_update = None
    if store_before_update is not None:
        def before_update() -> None:
            began = time.perf_counter()
            store_before_update()
            waited[0] += time.perf_counter() - began
    saved = False
    # The first step's start: goodput measures a group's first step from here (its excess over the
    # mean step is start-up), and what came before it since the group formed is preparation.
    emit(event="training_started", step=training.steps_done, rank=rank, world=world)
    loop_started = time.perf_counter()
    first_step = training.steps_done
    warm_at = None  # after the first step (DDP's bucket set-up): steady-state throughput from here
    monitors = LoopMonitors(emit, rank, world, cfg.steps)
    exit_save = ExitSave(lambda reason: _save_before_exit(checkpoints, training, reason),
                         leaving=exit_on_stop is not None)
    if stop is not None and exit_on_stop is not None:
        exit_save.watch(stop, exit_on_stop)
        if peers is not None and exit_on_peer_lost is not None:
            exit_save.watch_peers(peers.lost, exit_on_peer_lost)
        abandon_step_on(exit_save.check, training.module)
    try:
        while training.steps_done < cfg.steps:
            monitors.step_begins(training.steps_done + 1)
            try:
                loss = training.train_step(before_update, exit_save.update)
            except PeerFailure:
                exit_save.save("peer_failure")
                raise
            except StopRequested:  # abandoned mid-step, or no update after the stop's save
                exit_save.save("sigterm")
                raise
            finally:
                monitors.step_ends()
            step = training.steps_done
            if warm_at is None:
                warm_at = time.perf_counter()
            stall = {"ckpt_wait": waited[0]} if saved else {}
            # compute= and wait=: this rank's own time in the step and its wait for its peers
            emit(step=step, loss=loss, rank=rank, world=world, compute=training.last_compute,
                 wait=training.last_wait, **stall)
            monitors.stepped(step, loss)
            waited[0], saved = 0.0, False
            began = time.perf_counter()
            if checkpoints is not None and (step % cfg.ckpt_every == 0 or step == cfg.steps):
                # The last step's: nothing changes the state after it (a store may skip its copy)
                final = getattr(checkpoints, "save_final", None) if step == cfg.steps else None
                (final or checkpoints.save)(training.state())
                saved = True
            if on_step is not None:  # Ray's report, a barrier that carries the checkpoint
                on_step(training, loss)
            waited[0] += time.perf_counter() - began
            stopping = stop.wait(cfg.step_delay) if stop is not None else _pause(cfg.step_delay)
            if stopping:
                exit_save.save("sigterm")
                raise StopRequested(f"stopped after step {step}")
    finally:
        exit_save.close()
        monitors.close()
    if peers is not None:
        peers.finish()
    finish_saves = getattr(checkpoints, "wait", None)  # None too when there is no store
    began = time.perf_counter()
    if finish_saves is not None:
        finish_saves()
    ended = time.perf_counter()
    waited[0] += ended - began
    steady = training.steps_done - first_step - 1
    emit(event="done", step=training.steps_done, rank=rank, world=world,
         final_loss=training.loss_history[-1] if training.loss_history else float("nan"),
         ckpt_wait=waited[0] if saved else 0.0, train_seconds=ended - loop_started,
         steps_per_sec=steady / (ended - warm_at) if steady > 0 and ended > warm_at else 0.0)
    return training


def _pause(seconds: float) -> bool:
    """A --step-delay with nothing to stop it; False (no stop requested)."""
    if seconds:
        time.sleep(seconds)
    return False


def _save_before_exit(checkpoints: Checkpoints | None, training: Training, reason: str) -> None:
    """Every survivor holds the same complete state: save it (the store picks one writer)."""
    save_now = getattr(checkpoints, "save_now", None)
    if save_now is not None and training.steps_done > 0:
        save_now(training.state(), reason)
