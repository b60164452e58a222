"""Checkpoint files as a user and the store see them: plain torch.load, one writer per step,
unfinished or torn saves never chosen, the newest K kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests.training.conftest import REPO, env, run, torchrun_cmd
from training import checkpoint_format as fmt
from training.atomic import process_tag
from training.checkpoint import FileCheckpoints, newest_valid, write_files
from training.loop import Training
from training.options import TrainConfig

# What a learner types in their own session: no project on sys.path (-I), torch's API only.
LOAD_IN_PLAIN_PYTHON = """
import sys, torch
state = torch.load(sys.argv[1], weights_only=True)
model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256),
                            torch.nn.Tanh(), torch.nn.Linear(256, 1))
model.load_state_dict(state["model"])
assert not [m for m in sys.modules if m.split(".")[0] in ("training", "backend", "tui")]
print(" ".join(sorted(state)), state["step"], len(state["optimizer"]["state"]))
"""


def test_a_two_worker_checkpoint_opens_with_plain_torch_load(tmp_path):
    ckpt_dir = tmp_path / "ckpt"
    result = run(torchrun_cmd(2, "--steps", "5", "--ckpt-every", "5", "--ckpt-dir", str(ckpt_dir)))
    assert result.returncode == 0, result.stderr[-2000:]
    (path,) = fmt.list_files(ckpt_dir)
    opened = subprocess.run([sys.executable, "-I", "-c", LOAD_IN_PLAIN_PYTHON, str(path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert opened.returncode == 0, opened.stderr[-2000:]
    assert opened.stdout.split() == ["config", "device", "first_started_at", "loss_history", "model", "optimizer",
                                     "resumes", "rng", "sampler", "step", "world_size", "5", "6"]
    meta = fmt.verify_file(path)
    assert (meta["step"], meta["world_size"], meta["reason"]) == (5, 2, "periodic")


def _training(steps: int = 3) -> Training:
    if not torch.distributed.is_initialized():  # DDP wants a group, even of one
        torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    training = Training(TrainConfig(steps=steps), rank=0, world=1)
    for _ in range(steps):
        training.train_step()
    return training


def test_survivors_racing_for_one_step_write_it_once(tmp_path, capsys):
    training = _training()
    rank0, rank1 = FileCheckpoints(tmp_path, keep=3, rank=0), FileCheckpoints(tmp_path, keep=3, rank=1)
    fmt.claim(tmp_path, 3)  # another survivor is writing step 3 (or died doing it)
    rank1.save_now(training.state(), "peer_failure")
    rank0.save_now(training.state(), "peer_failure")
    assert fmt.list_files(tmp_path) == []
    training.train_step()
    rank1.save_now(training.state(), "peer_failure")
    rank0.save_now(training.state(), "sigterm")  # step 4 is on disk already
    saved = [line for line in capsys.readouterr().out.splitlines() if "event=checkpoint_saved" in line]
    assert [line.split()[1:3] for line in saved] == [["step=4", "reason=peer_failure"]]
    assert fmt.verify_file(tmp_path / fmt.file_name(4))["rank"] == 1


def test_a_save_is_said_before_a_survivor_waiting_on_its_commit_goes_on(tmp_path, capsys):
    """A survivor waits for a periodic save in flight to commit, not for its fsync, and may exit
    at once: its line must be out by then, or the run's record misses a save it kept."""
    training = _training()
    said_at_commit = []

    def committed() -> None:
        said_at_commit.extend(line for line in capsys.readouterr().out.splitlines()
                              if "event=checkpoint_saved" in line)

    write_files(tmp_path, training.state(), "periodic", rank=0, on_commit=committed)
    assert [line.split()[1:3] for line in said_at_commit] == [["step=3", "reason=periodic"]]


# A rank that claims step 3 for its writer, then holds the claim until its stdin closes and exits
# without releasing it, as a rank killed mid-save does.
CLAIM_AND_HOLD = """
import sys
from pathlib import Path
from training import checkpoint_format as fmt
assert fmt.claim(Path(sys.argv[1]), 3)
print("claimed", flush=True)
sys.stdin.read()
"""


def test_a_claim_held_by_a_dead_rank_does_not_block_the_survivors_save(tmp_path, capsys):
    training = _training()
    rank0, rank1 = FileCheckpoints(tmp_path, keep=3, rank=0), FileCheckpoints(tmp_path, keep=3, rank=1)
    holder = subprocess.Popen([sys.executable, "-c", CLAIM_AND_HOLD, str(tmp_path)], cwd=REPO,
                              env=env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "claimed\n"
    rank1.save_now(training.state(), "peer_failure")  # the holder is alive: it is writing step 3
    assert fmt.list_files(tmp_path) == []

    holder.stdin.close()
    assert holder.wait(timeout=60) == 0  # died holding the claim
    rank1.save_now(training.state(), "peer_failure")
    rank0.save_now(training.state(), "sigterm")  # a second survivor finds the step committed
    saved = [line for line in capsys.readouterr().out.splitlines() if "event=checkpoint_saved" in line]
    assert [line.split()[1:3] for line in saved] == [["step=3", "reason=peer_failure"]]
    assert fmt.verify_file(tmp_path / fmt.file_name(3))["rank"] == 1
    assert sorted(p.name for p in fmt.claim_names(tmp_path, 3)) == [fmt.claim_name(3), fmt.claim_name(3, 1)]


def test_resume_skips_unfinished_and_torn_checkpoints_and_prunes_to_keep(tmp_path):
    training = _training()
    store = FileCheckpoints(tmp_path, keep=2, rank=0)
    for _ in range(3):
        training.train_step()
        store.save(training.state())
        store.wait()
    assert [p.name for p in fmt.list_files(tmp_path)] == [fmt.file_name(s) for s in (5, 6)]
    newest = tmp_path / fmt.file_name(6)
    newest.write_bytes(newest.read_bytes()[:-1])  # torn
    unfinished = tmp_path / fmt.file_name(7)  # renamed into place, no sidecar yet
    unfinished.write_bytes(newest.read_bytes())
    assert newest_valid(tmp_path, 0) == tmp_path / fmt.file_name(5)


def test_a_survivors_save_skips_fsync_and_the_resuming_rank_0_syncs_it(tmp_path, monkeypatch):
    """The group's restart waits for a survivor's save, so it is not fsynced on the way down; the
    next group's rank 0 syncs the file it resumes from, off the training thread."""
    import os
    import threading

    from training import checkpoint

    synced: list[str] = []
    all_synced = threading.Event()
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        if synced[-1] == str(fmt.sidecar_path(tmp_path / fmt.file_name(3))):
            all_synced.set()
        real_fsync(fd)

    monkeypatch.setattr(checkpoint.os, "fsync", recording_fsync)
    FileCheckpoints(tmp_path, keep=3, rank=1).save_now(_training().state(), "peer_failure")
    data = tmp_path / fmt.file_name(3)
    assert fmt.verify_file(data)["reason"] == "peer_failure"
    assert not [p for p in synced if fmt.file_name(3) in p]  # neither the data file nor its temp

    assert FileCheckpoints(tmp_path, keep=3, rank=0).load_latest()["step"] == 3
    assert all_synced.wait(30)
    assert synced[-2:] == [str(data), str(fmt.sidecar_path(data))]


def _saved(store: FileCheckpoints, training: Training, steps: int) -> None:
    for _ in range(steps):
        training.train_step()
        store.save(training.state())
        store.wait()


def test_a_save_writes_over_the_checkpoint_it_prunes_unless_a_snapshot_links_it(tmp_path):
    """Filling pages already in the page cache instead of allocating new ones (0.1 s instead of
    2.4 s per GB on this machine's ext4): the file the save would prune is written over in place,
    under a temp name a snapshot skips; never one a snapshot's hard link still holds."""
    import os

    training = _training(0)
    store = FileCheckpoints(tmp_path, keep=3, rank=0)
    _saved(store, training, 3)
    oldest = fmt.list_files(tmp_path)[0]
    inode = os.stat(oldest).st_ino
    _saved(store, training, 1)  # step 4 prunes step 1: written into its file
    assert [int(fmt.NAME_RE.match(p.name).group(1)) for p in fmt.list_files(tmp_path)] == [2, 3, 4]
    newest = fmt.list_files(tmp_path)[-1]
    assert os.stat(newest).st_ino == inode and fmt.verify_file(newest)["step"] == 4
    held = tmp_path / "snapshot-link"
    os.link(fmt.list_files(tmp_path)[0], held)  # step 2, as a snapshot holds it
    before = held.read_bytes()
    _saved(store, training, 1)
    assert held.read_bytes() == before and os.stat(held).st_nlink == 1  # kept whole, pruned from the run
    assert fmt.verify_file(fmt.list_files(tmp_path)[-1])["step"] == 5


def test_a_resumed_state_is_read_not_mapped_so_its_file_may_be_written_over(tmp_path):
    """A mapped checkpoint costs a page fault per 4 KiB on the first update (a second at 1 GB);
    the state is read instead, so nothing written to the file later reaches the live tensors."""
    training = _training(0)
    writer = FileCheckpoints(tmp_path, keep=2, rank=0)
    _saved(writer, training, 1)
    expected = {name: tensor.clone() for name, tensor in training.module.state_dict().items()}
    state = FileCheckpoints(tmp_path, keep=2, rank=0).load_latest()
    path = tmp_path / fmt.file_name(1)
    with open(path, "r+b") as f:  # what a save reusing the file does to its pages
        f.write(b"\xff" * path.stat().st_size)
    assert all(torch.equal(state["model"][name], tensor) for name, tensor in expected.items())


def test_a_survivors_save_writes_over_the_oldest_while_one_other_remains(tmp_path):
    """A restart waits for the survivor's save: it takes a cached file sooner than a periodic
    save would (two committed of keep=3), one fewer being kept until the periodic saves catch up."""
    import os

    training = _training(0)
    store = FileCheckpoints(tmp_path, keep=3, rank=0)
    _saved(store, training, 2)
    inode = os.stat(tmp_path / fmt.file_name(1)).st_ino
    training.train_step()
    store.save_now(training.state(), "peer_failure")
    assert [int(fmt.NAME_RE.match(p.name).group(1)) for p in fmt.list_files(tmp_path)] == [2, 3]
    assert os.stat(tmp_path / fmt.file_name(3)).st_ino == inode and fmt.verify_file(tmp_path / fmt.file_name(3))
    _saved(store, training, 1)  # a periodic save does not: three are kept again
    assert len(fmt.list_files(tmp_path)) == 3


# A rank's writer killed mid-save: it claimed step 3 and had written part of the step's file.
CLAIM_WRITE_AND_DIE = """
import os, sys
from pathlib import Path
from training import checkpoint_format as fmt
directory = Path(sys.argv[1])
assert fmt.claim(directory, 3)
(directory / fmt.temp_name(3, os.getpid())).write_bytes(bytes(1 << 20))
"""


def test_a_survivors_save_writes_over_the_file_a_writer_killed_mid_save_left(tmp_path):
    """That writer had taken the oldest checkpoint's file, so as few as one checkpoint may be left
    committed, and the unfinished file holds the pages written last: the survivor's save takes it
    (a new file's pages cost seconds per GB here), and no committed checkpoint is written over."""
    import os

    training = _training(0)
    _saved(FileCheckpoints(tmp_path, keep=2, rank=0), training, 2)
    dead = subprocess.run([sys.executable, "-c", CLAIM_WRITE_AND_DIE, str(tmp_path)], cwd=REPO, env=env(),
                          capture_output=True, text=True, timeout=120)
    assert dead.returncode == 0, dead.stderr
    (unfinished,) = [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert fmt.abandoned_temp(tmp_path) == unfinished
    inode = os.stat(unfinished).st_ino
    training.train_step()
    FileCheckpoints(tmp_path, keep=2, rank=1).save_now(training.state(), "peer_failure")
    assert [p.name for p in fmt.list_files(tmp_path)] == [fmt.file_name(2), fmt.file_name(3)]  # keep=2
    assert os.stat(tmp_path / fmt.file_name(3)).st_ino == inode
    assert fmt.verify_file(tmp_path / fmt.file_name(3))["reason"] == "peer_failure"
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_a_temp_file_whose_writer_lives_is_not_taken(tmp_path):
    fmt.claim(tmp_path, 3)  # this process: alive
    (tmp_path / fmt.temp_name(3, 12345)).write_bytes(b"x")
    (tmp_path / fmt.temp_name(4, 12345)).write_bytes(b"x")  # no claim at all: not known abandoned
    assert fmt.abandoned_temp(tmp_path) is None


def test_the_checkpoint_read_while_the_group_forms_is_the_one_resumed_unless_another_is_chosen(tmp_path):
    training = _training(0)
    store = FileCheckpoints(tmp_path, keep=3, rank=0)
    _saved(store, training, 2)
    resumed = FileCheckpoints(tmp_path, keep=3, rank=0)
    resumed.prefetch()
    assert resumed._prefetch.path == tmp_path / fmt.file_name(2)
    assert int(resumed.load_latest()["step"]) == 2 and resumed._prefetch is None
    # a newer step committed after the read began (a survivor still saving): the chosen file is read
    early = FileCheckpoints(tmp_path, keep=3, rank=0)
    early.prefetch()
    _saved(store, training, 1)
    assert int(early.load_latest()["step"]) == 3


def test_a_survivor_waits_for_a_periodic_save_to_be_committed_not_for_its_fsync(tmp_path, monkeypatch):
    """At 1 GB an fsync takes seconds, and a restart waits for the survivor's save: the periodic
    save in flight is a checkpoint once committed, and the survivor writes its step without
    waiting for that fsync (the process leaves; the next group syncs what it resumes from)."""
    import os
    import threading

    release = threading.Event()
    syncing = threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:  # a data file's fsync blocks until released; directories pass
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".pt"):
            syncing.set()
            assert release.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    training = _training(0)
    store = FileCheckpoints(tmp_path, keep=3, rank=0)
    training.train_step()
    store.save(training.state())  # step 1: committed, then held in its fsync
    assert syncing.wait(30)
    training.train_step()
    store.save_now(training.state(), "peer_failure")  # step 2, while step 1 is still syncing
    assert [fmt.verify_file(p)["step"] for p in fmt.list_files(tmp_path)] == [1, 2]
    release.set()
    store.wait()


def test_a_survivors_save_gives_up_an_older_periodic_save_in_flight_and_writes_over_its_file(tmp_path, monkeypatch,
                                                                                               capsys):
    """A kill during rank 0's periodic save: the survivor's state is a newer step, so waiting for
    the older save to commit (0.7 s of a 1 GB restart) buys nothing. That save stops between two
    chunks and the survivor's is written over its half-written file, whose pages are cached."""
    import threading

    import training.checkpoint as checkpoint

    writing, release = threading.Event(), threading.Event()
    real_save = torch.save

    def held_save(obj, f, *args, **kwargs):  # the periodic save is held at its start, mid-flight
        if not writing.is_set():
            writing.set()
            assert release.wait(30)
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(checkpoint.torch, "save", held_save)
    training = _training(0)
    store = FileCheckpoints(tmp_path, keep=3, rank=0)
    training.train_step()
    store.save(training.state())  # step 1, held in its write
    assert writing.wait(30)
    training.train_step()
    expected = {name: t.clone() for name, t in training.state()["model"].items()}
    survivor = threading.Thread(target=store.save_now, args=(training.state(), "sigterm"))
    survivor.start()
    assert store._superseded.wait(30)  # the survivor gave the step-1 save up before it went on
    release.set()
    survivor.join(60)
    assert not survivor.is_alive()
    (saved,) = fmt.list_files(tmp_path)  # step 1 never committed; no temp file left behind
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(fmt.claim_name(2))) == \
        sorted([saved.name, fmt.sidecar_path(saved).name])
    assert fmt.verify_file(saved)["step"] == 2
    loaded = checkpoint.load_state(saved)["model"]
    assert all(torch.equal(loaded[name], t) for name, t in expected.items())
    lines = capsys.readouterr().out
    assert "event=checkpoint_superseded step=1 by=2" in lines and "checkpoint_failed" not in lines


def test_a_file_this_boot_wrote_is_trusted_by_its_size_another_is_hashed(tmp_path):
    training = _training(0)
    store = FileCheckpoints(tmp_path, keep=3, rank=0)
    _saved(store, training, 1)
    (path,) = fmt.list_files(tmp_path)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # a flipped byte, same size: what only the checksum sees
    path.write_bytes(bytes(data))
    assert fmt.verify_file(path, trust_this_boot=True)["step"] == 1  # this kernel took the write
    meta = fmt.read_meta(path)
    fmt.write_sidecar(path, dict(meta, boot="an-earlier-boot"))
    with pytest.raises(fmt.InvalidCheckpoint, match="checksum"):
        fmt.verify_file(path, trust_this_boot=True)


def test_a_claim_holder_that_is_exiting_counts_as_dead(monkeypatch):
    """A SIGKILLed rank closes its sockets (the peer watch hears it) before it is a zombie: in
    between, /proc/PID/stat says PF_EXITING, and the survivor must not wait on a dead holder."""
    from training import process_start

    stat = "42 (python) R 1 42 42 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0"
    for flags, expected in ((0x400000, "12345"), (0x400004, None)):
        line = stat.format(flags=flags)
        monkeypatch.setattr(process_start.Path, "read_text", lambda self, line=line: line)
        assert process_start.start_ticks(42) == expected


def test_a_temp_name_is_this_processes_own_where_pids_repeat():
    """Every pod's worker is PID 2 in a PID namespace of its own (backend/local/node/pidns.py),
    and pods share a volume: names made of the pid alone were the same in two pods starting at
    once, and one's unlink of `.write-probe-2` took the other's probe (its worker exited 2,
    "cannot write to --ckpt-dir": an extra restart after a lost node). A temp name carries a
    random part besides the pid, made again in each fork (warm workers are a zygote's forks)."""
    before = process_tag()
    assert process_tag() == before and before.startswith(f"{os.getpid()}-")
    read, write = os.pipe()
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            os.write(write, f"{process_tag()}\n".encode())
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    os.close(write)
    with os.fdopen(read) as got:
        tags = got.read().split()
    assert len(tags) == 2 and len({before, *tags}) == 3
    assert fmt.is_leftover(fmt.temp_name(15, before)) and fmt._TEMP_RE.match(fmt.temp_name(15, before))


def test_the_last_save_is_written_from_the_live_tensors_and_a_survivor_frees_the_copy(tmp_path, capsys):
    """A periodic save copies the state first (the next step's update would change it while it is
    written); the loop's last save has no update after it, so it is written as it is. A survivor's
    save lets the periodic saves' copy go: the process leaves after it."""
    from training.loop import run

    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    store = FileCheckpoints(tmp_path, keep=3, rank=0)
    training = run(TrainConfig(steps=5, ckpt_every=4), 0, 1, store)
    assert [fmt.verify_file(p)["step"] for p in fmt.list_files(tmp_path)] == [4, 5]
    step4, step5 = (torch.load(p, weights_only=True)["model"] for p in fmt.list_files(tmp_path))
    assert all(torch.equal(step5[name], t) for name, t in training.module.state_dict().items())
    first = next(iter(step4))
    copied = store._buffers[0]  # the copy holds what was copied last: step 4's, not step 5's
    assert torch.equal(copied, step4[first]) and not torch.equal(copied, step5[first])

    training.train_step()
    store.save_now(training.state(), "peer_failure")
    assert store._buffers == []
    assert fmt.verify_file(fmt.list_files(tmp_path)[-1])["step"] == 6
