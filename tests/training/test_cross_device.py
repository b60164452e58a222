"""Checkpoints across devices and world sizes, in real training processes on this CPU-only machine.

A file saved with GPU tensors (what torch.save of a GPU model's state writes) is made here by
tagging every storage `cuda:0` as torch.save's own location tagger would on a GPU: plain
torch.load cannot open it on this machine, the training core can and resumes from it bitwise
equal. What training itself writes holds CPU tensors only, and its sidecar names the device."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
import torch.serialization

from tests.training.conftest import REPO, plain_cmd, run, torch_alone
from training import checkpoint_format as fmt
from training.checkpoint import load_state, write_files


def storage_locations(path) -> set[str]:
    """The device every storage in a torch.save file was tagged with when it was written."""
    seen: set[str] = set()

    def record(storage, location):
        seen.add(location)
        return storage

    torch.load(path, weights_only=True, map_location=record)
    return seen


def tag_saves_as_gpu(monkeypatch) -> None:
    """Until `monkeypatch` undoes it, torch.save tags every storage cuda:0, as for GPU tensors."""
    monkeypatch.setattr(torch.serialization, "_package_registry", list(torch.serialization._package_registry))
    torch.serialization.register_package(0, lambda obj: "cuda:0", lambda obj, location: None)


def _resave_as_if_on_gpu(ckpt_dir, step: int, **changes) -> None:
    """Rewrite checkpoint `step` with every tensor tagged cuda:0 and the sidecar naming cuda:0."""
    path = ckpt_dir / fmt.file_name(step)
    state = dict(load_state(path), device="cuda:0", **changes)
    fmt.sidecar_path(path).unlink()
    path.unlink()
    write_files(ckpt_dir, state, "periodic", 0)


def test_a_checkpoint_with_gpu_tensors_resumes_on_the_cpu_bitwise_equal(tmp_path, monkeypatch):
    args = ["--steps", "8", "--ckpt-every", "5", "--device", "cpu"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert run(plain_cmd(*args, "--ckpt-dir", str(straight))).returncode == 0
    first = run(plain_cmd("--steps", "5", "--ckpt-every", "5", "--ckpt-dir", str(resumed)))
    assert first.returncode == 0, first.stderr
    assert storage_locations(resumed / fmt.file_name(5)) == {"cpu"}  # what training writes
    assert fmt.inspect(resumed / fmt.file_name(5)).device == "cpu"

    with monkeypatch.context() as patch:
        tag_saves_as_gpu(patch)
        _resave_as_if_on_gpu(resumed, 5)
    path = resumed / fmt.file_name(5)
    assert storage_locations(path) == {"cuda:0"}
    assert fmt.inspect(path).device == "cuda:0"  # the browser's reading, no torch
    plain = subprocess.run([sys.executable, "-I", "-c", "import sys, torch; torch.load(sys.argv[1], weights_only=True)",
                            str(path)], capture_output=True, text=True, timeout=120)
    assert plain.returncode != 0 and "CUDA" in plain.stderr  # no GPU here: torch.load alone refuses
    assert load_state(path)["model"]["0.weight"].device == torch.device("cpu")

    (resumed / "metrics.json").unlink()
    again = run(plain_cmd(*args, "--ckpt-dir", str(resumed)))
    assert again.returncode == 0, again.stderr[-2000:]
    assert [e["from_step"] for e in again.events("resumed")] == ["5"]
    assert again.events("start")[0]["device"] == "cpu"
    a = json.loads((straight / "metrics.json").read_text())
    b = json.loads((resumed / "metrics.json").read_text())
    assert a["params_sha256"] == b["params_sha256"] and a["loss_history"] == b["loss_history"]


def test_a_checkpoint_of_another_world_size_is_refused_in_one_line_and_nothing_written(tmp_path):
    ckpt_dir = tmp_path / "ckpt"
    first = run(plain_cmd("--steps", "5", "--ckpt-every", "5", "--ckpt-dir", str(ckpt_dir)))
    assert first.returncode == 0, first.stderr
    path = ckpt_dir / fmt.file_name(5)
    state = dict(load_state(path), world_size=2)  # as a two-worker group saved it
    fmt.sidecar_path(path).unlink()
    path.unlink()
    write_files(ckpt_dir, state, "periodic", 0)
    (ckpt_dir / "metrics.json").unlink()
    def files() -> dict[str, bytes]:
        """Checkpoints and metrics (the run's record, records/, logs the refused attempt's start)."""
        return {p.name: p.read_bytes() for p in ckpt_dir.iterdir() if p.is_file() and not fmt.is_leftover(p.name)}

    before = files()

    refused = run(plain_cmd("--steps", "10", "--ckpt-every", "5", "--ckpt-dir", str(ckpt_dir)))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "training.ddp: error: the newest checkpoint (step 5) was saved by 2 worker(s), this group has 1: each "
        "rank's data depends on the world size, so it would not resume exactly; run with the same number of "
        "workers, or start afresh in a new checkpoint directory"]
    assert files() == before  # (a group's rank 0 clears claims of dead writers when it starts)
    assert not [r for r in refused.records() if "loss" in r]


def test_training_runs_with_torch_alone(tmp_path):
    """A GPU machine's python may have torch and nothing else: no numpy (not a torch dependency)."""
    ckpt_dir = tmp_path / "ckpt"
    done = subprocess.run(plain_cmd("--steps", "6", "--ckpt-every", "3", "--ckpt-dir", str(ckpt_dir)), cwd=REPO,
                          env=torch_alone(tmp_path / "site"), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "numpy" not in load_state(ckpt_dir / fmt.file_name(6))["rng"]
    assert json.loads((ckpt_dir / "metrics.json").read_text())["steps"] == 6
