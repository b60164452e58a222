"""The save before exit (training/exit_save.py): a stop is saved at once on its own thread, the
state saved is one whole step's, no update follows it, and it is made once whoever asks."""

from __future__ import annotations

import threading

import pytest
import torch

from training import checkpoint_format as fmt
from training.checkpoint import FileCheckpoints, load_state
from training.exit_save import ExitSave, StopRequested, abandon_step_on
from training.loop import Training
from training.options import TrainConfig


def _training(steps: int) -> Training:
    if not torch.distributed.is_initialized():  # DDP wants a group, even of one
        torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    training = Training(TrainConfig(steps=10), rank=0, world=1)
    for _ in range(steps):
        training.train_step()
    return training


def _weights(training: Training) -> list[torch.Tensor]:
    return [p.detach().clone() for p in training.module.parameters()]


def test_a_stop_is_saved_at_once_as_the_complete_step_and_the_step_in_flight_is_abandoned(tmp_path):
    training = _training(steps=3)
    store = FileCheckpoints(tmp_path, keep=2, rank=0)
    exit_save = ExitSave(lambda reason: store.save_now(training.state(), reason))
    stop, left = threading.Event(), threading.Event()
    exit_save.watch(stop, left.set)
    before = _weights(training)
    stop.set()  # between steps here; mid-step in a process, where the step computes meanwhile
    assert left.wait(60)
    (saved,) = fmt.list_files(tmp_path)
    assert fmt.verify_file(saved)["reason"] == "sigterm" and load_state(saved)["step"] == 3
    with pytest.raises(StopRequested):  # the next update: the checkpoint says step 3, so must the rank
        training.train_step(updating=exit_save.update)
    assert training.steps_done == 3
    assert all(torch.equal(a, b) for a, b in zip(before, _weights(training)))


def test_a_stop_during_an_update_is_saved_after_it_whole():
    training = _training(steps=2)
    saved_steps: list[int] = []
    exit_save = ExitSave(lambda reason: saved_steps.append(training.steps_done))
    stop, left = threading.Event(), threading.Event()
    exit_save.watch(stop, left.set)

    def before_update() -> None:  # inside the update: the stop comes now
        stop.set()
        assert not left.wait(0.3)  # the save waits for the update (a lost exclusion saves here)

    training.train_step(before_update, exit_save.update)
    assert left.wait(60)
    assert saved_steps == [3]  # the step whose update was under way, counted


def test_a_failed_collective_and_a_stop_together_save_once_and_neither_leaves_early(tmp_path):
    writing, release = threading.Event(), threading.Event()
    reasons: list[str] = []

    def slow_save(reason: str) -> None:
        reasons.append(reason)
        writing.set()
        release.wait(60)

    exit_save = ExitSave(slow_save)
    stop, left = threading.Event(), threading.Event()
    exit_save.watch(stop, left.set)
    stop.set()
    assert writing.wait(60)
    second = threading.Thread(target=exit_save.save, args=("peer_failure",))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting for the stop's save to be committed, not leaving before it
    release.set()
    second.join(60)
    assert left.wait(60) and reasons == ["sigterm"]


def test_nothing_is_saved_for_a_stop_after_the_loop_ended():
    reasons: list[str] = []
    exit_save = ExitSave(reasons.append)
    stop, left = threading.Event(), threading.Event()
    watcher = exit_save.watch(stop, left.set)
    exit_save.close()
    stop.set()
    watcher.join(60)
    assert not watcher.is_alive() and reasons == [] and not left.is_set()


@pytest.mark.parametrize("stopped_in", ["forward", "backward"])
def test_a_stopped_rank_abandons_the_step_in_flight_and_its_state_is_untouched(stopped_in):
    """So the training thread stops competing with the save for the cores (a dead gloo peer is
    only noticed when the backward pass ends, a step later at 1 GB)."""
    training = _training(steps=2)
    stop = threading.Event()

    def check() -> None:
        if stop.is_set():
            raise StopRequested("stopped")

    abandon_step_on(check, training.module)
    layers = list(training.module.children())
    if stopped_in == "forward":
        layers[1].register_forward_hook(lambda *_: stop.set())  # the next layer's forward stops
    else:
        layers[-1].register_forward_hook(lambda *_: stop.set())  # forward ends; backward stops
    before = _weights(training)
    with pytest.raises(StopRequested):
        training.train_step()
    assert training.steps_done == 2
    assert all(torch.equal(a, b) for a, b in zip(before, _weights(training)))
