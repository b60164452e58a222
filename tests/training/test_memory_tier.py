"""The node-memory tier in real torchrun processes (training/memory_tier.py): a survivor saves into
memory, the next group loads from there when the copy is whole and newer than the volume's, else
from the volume, and either way ends bitwise equal to a run that was never killed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.training.conftest import REPO, env, run, torchrun_cmd
from training import checkpoint_format as fmt
from training.logfmt import parse_line

ARGS = ["--steps", "20", "--ckpt-every", "5"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """An uninterrupted run's checkpoint directory: the reference."""
    ckpt = tmp_path_factory.mktemp("straight") / "ckpt"
    result = run(torchrun_cmd(2, *ARGS, "--ckpt-dir", str(ckpt)))
    assert result.returncode == 0, result.stderr[-2000:]
    return ckpt


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> tuple[Path, Path, int]:
    """(volume, memory, step saved): rank 1 SIGKILLed after step 12 of a run with a memory tier."""
    top = tmp_path_factory.mktemp("killed")
    volume, memory = top / "ckpt", top / "memory"
    proc = subprocess.Popen(torchrun_cmd(2, *ARGS, "--step-delay", "0.1", "--ckpt-dir", str(volume),
                                         "--memory-dir", str(memory)),
                            cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    records, rank1 = [], None
    for line in proc.stdout:  # to the end: the survivor prints its save
        fields = parse_line(line)
        records.append(fields)
        if fields.get("event") == "start" and fields.get("rank") == "1":
            rank1 = int(fields["pid"])
        if fields.get("step") == "12" and "event" not in fields and rank1:
            os.kill(rank1, signal.SIGKILL)
            rank1 = None
    assert proc.wait(timeout=120) != 0
    (saved,) = [r for r in records if r.get("event") == "checkpoint_saved" and r["reason"] != "periodic"]
    assert saved["tier"] == "memory" and int(saved["step"]) >= 12
    step = int(saved["step"])
    # In memory only: the volume has the periodic checkpoints, not the survivor's step.
    assert [p.name for p in fmt.list_files(memory)] == [fmt.file_name(step)]
    assert fmt.file_name(step) not in [p.name for p in fmt.list_files(volume)]
    return volume, memory, step


def _case(killed, tmp_path: Path) -> tuple[Path, Path, int]:
    """A copy of the killed run's volume and memory for one test to resume from."""
    volume, memory, step = killed
    shutil.copytree(volume, tmp_path / "ckpt")
    shutil.copytree(memory, tmp_path / "memory")
    return tmp_path / "ckpt", tmp_path / "memory", step


def _resume(volume: Path, memory: Path):
    result = run(torchrun_cmd(2, *ARGS, "--ckpt-dir", str(volume), "--memory-dir", str(memory)))
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def _assert_bitwise_equal(straight: Path, resumed: Path) -> None:
    a = json.loads((straight / "metrics.json").read_text())
    b = json.loads((resumed / "metrics.json").read_text())
    assert b["resumes"] == 1
    assert a["params_sha256"] == b["params_sha256"] and a["loss_history"] == b["loss_history"]


def test_the_next_group_loads_the_survivors_step_from_memory_and_promotes_it_to_the_volume(
        straight, killed, tmp_path):
    volume, memory, step = _case(killed, tmp_path)
    result = _resume(volume, memory)
    loaded = result.events("checkpoint_memory_loaded")
    assert sorted(e["rank"] for e in loaded) == ["0", "1"] and {e["step"] for e in loaded} == {str(step)}
    assert [e["from_step"] for e in result.events("resumed")] == [str(step)] * 2
    # The holder copied it to the volume (the durable copy) and it left memory; the job's end
    # removed the job's memory directory.
    (promoted,) = result.events("checkpoint_promoted")
    assert promoted["step"] == str(step)
    assert fmt.verify_file(volume / fmt.file_name(step))["step"] == step
    assert not memory.exists()
    _assert_bitwise_equal(straight, volume)


def _damage(volume: Path, memory: Path, step: int, damage: str) -> int:
    """Damage the memory copy of `step` as `damage` says; the volume's newest step after it."""
    copy = memory / fmt.file_name(step)
    newest_on_volume = int(fmt.NAME_RE.match(fmt.list_files(volume)[-1].name).group(1))
    if damage == "stale":  # the volume has the same step already: the copy is no newer
        shutil.copy(copy, volume / copy.name)
        shutil.copy(fmt.sidecar_path(copy), fmt.sidecar_path(volume / copy.name))
        newest_on_volume = step
    elif damage == "absent":
        for path in memory.iterdir():
            path.unlink()
    elif damage == "corrupt":  # same size: only the checksum tells
        data = bytearray(copy.read_bytes())
        data[len(data) // 2] ^= 0xFF
        copy.write_bytes(bytes(data))
    else:  # a survivor killed between the rename and its sidecar
        fmt.sidecar_path(copy).unlink()
    return newest_on_volume


@pytest.mark.parametrize("damage", ["absent", "corrupt", "uncommitted", "stale"])
def test_a_missing_broken_or_stale_memory_copy_is_not_taken(killed, tmp_path, damage, capsys):
    """The choice each rank makes before the group loads (in this process: one rank, no group)."""
    from training import memory_tier

    volume, memory, step = _case(killed, tmp_path)
    newest_on_volume = _damage(volume, memory, step, damage)
    copy = memory_tier.MemoryCopy(memory, rank=0)
    taken, holder = memory_tier.choose(copy.step, newest_on_volume)
    if damage == "corrupt":  # whole by size and newer: chosen, then refused as it is read
        assert (taken, holder) == (step, 0) and memory_tier.share(copy, holder) is None
    else:
        assert (taken, holder) == (-1, -1)
    skipped = [parse_line(line) for line in capsys.readouterr().out.splitlines() if "event=checkpoint_skipped" in line]
    assert {(e["file"], e["tier"]) for e in skipped} == (
        {(fmt.file_name(step), "memory")} if damage in ("corrupt", "uncommitted") else set())


def test_a_broken_memory_copy_leaves_the_volume_to_resume_from_on_every_rank(straight, killed, tmp_path):
    """Through two ranks: the holder finds the copy broken as it sends it, every rank takes the
    volume's newest step instead, the copy is not kept, and the run ends bitwise equal."""
    volume, memory, step = _case(killed, tmp_path)
    newest_on_volume = _damage(volume, memory, step, "corrupt")
    result = _resume(volume, memory)
    assert not result.events("checkpoint_memory_loaded")
    assert [e["from_step"] for e in result.events("resumed")] == [str(newest_on_volume)] * 2
    assert not memory.exists() or not fmt.list_files(memory)  # a copy not taken is not kept
    skipped = [e for e in result.events("checkpoint_skipped") if e.get("tier") == "memory"]
    assert skipped and {e["file"] for e in skipped} == {fmt.file_name(step)}
    _assert_bitwise_equal(straight, volume)


def test_a_promoted_copy_stays_uncommitted_and_the_next_survivors_save_writes_over_it(tmp_path):
    import torch

    from training import memory_tier
    from training.checkpoint import save_once

    memory, volume = tmp_path / "memory", tmp_path / "volume"
    memory.mkdir()
    volume.mkdir()
    copy = fmt.write_checkpoint(memory, {"step": 7, "world_size": 2}, b"x" * 4096)
    memory_tier.promote(copy, volume, rank=0)
    assert fmt.verify_file(volume / copy.name)["step"] == 7
    assert fmt.list_files(memory) == [] and memory_tier.spare(memory) is not None  # no copy, a spare
    spare_inode = memory_tier.spare(memory).stat().st_ino

    state = {"step": 9, "world_size": 2, "loss_history": [0.5], "w": torch.ones(3)}
    assert save_once(memory, state, "peer_failure", 0, reuse=memory_tier.spare(memory), tier="memory")
    (saved,) = fmt.list_files(memory)
    assert fmt.verify_file(saved)["step"] == 9 and saved.stat().st_ino == spare_inode
    assert memory_tier.spare(memory) is None
