"""The survivor's save when Ray tears its group down while the loop waits in `ray.train.report`,
a barrier the dead peer never reaches (training/ray_checkpoints.py, `save_in_report`): Ray's
shutdown call saves the loop's step for it, once, whichever thread gets there first.

The real Ray run (test_ray_train.py) cannot aim a kill at that barrier's few milliseconds, so
here the barrier is one that never opens until the test says so, and the rest is the real store,
the real loop state and the real files."""

from __future__ import annotations

import threading

import pytest
import torch

from training import checkpoint_format as fmt
from training.loop import Training
from training.options import TrainConfig
from training.ray_checkpoints import RayCheckpoints


@pytest.fixture
def training() -> Training:
    if not torch.distributed.is_initialized():  # DDP wants a group, even of one
        torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    training = Training(TrainConfig(steps=4, ckpt_every=4), rank=0, world=1)
    for _ in range(3):
        training.train_step()
    return training


@pytest.fixture
def barrier(monkeypatch):
    """ray.train.report as a barrier whose peer is dead: it returns only once opened."""
    import ray.train

    opened, reached = threading.Event(), threading.Event()

    def report(*_args, **_kwargs):
        reached.set()
        assert opened.wait(60), "the test never opened the barrier"

    monkeypatch.setattr(ray.train, "report", report)
    return reached, opened


def test_a_loop_held_in_rays_report_gets_its_step_saved_by_the_shutdown_call(tmp_path, training, barrier, capsys):
    reached, opened = barrier
    store = RayCheckpoints(0, 1, report_every=3, staging=tmp_path / "staging", run_dir=tmp_path / "run")
    assert not store.save_in_report()  # not in a report: the loop saves for itself
    loop = threading.Thread(target=store.report_step, args=(training, 0.5))  # step 3: a report step
    loop.start()
    assert reached.wait(60)

    assert store.save_in_report()  # Ray's shutdown call, while the loop is held
    saved = tmp_path / "run" / "ckpt-step-000003" / fmt.file_name(3)
    meta = fmt.verify_file(saved)
    assert (meta["step"], meta["reason"]) == (3, "sigterm")

    opened.set()  # the barrier opens after all (a live peer): the loop then stops and saves
    loop.join(60)
    assert not store.save_now(training.state(), "sigterm")  # step 3 is on disk already
    lines = [line for line in capsys.readouterr().out.splitlines() if "event=checkpoint_saved" in line]
    assert [line.split()[1:3] for line in lines] == [["step=3", "reason=sigterm"]]
    assert not store.save_in_report()  # out of the report again
