"""training/peer_watch.py: a rank learns that a peer's process is gone when it goes (the kernel
closes a dead process's sockets, SIGKILL included), not at the next collective, and a peer that
said goodbye is never taken for a lost one. Real processes, a real rendezvous store."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
import torch.distributed as dist

from tests.training.conftest import REPO, env, plain_cmd
from training.logfmt import parse_line
from training.peer_watch import PeerWatch

# A peer in a process of its own: joins the watch, says "armed", then on "bye" on stdin says
# goodbye and leaves (exit 0); killed before that, it is a lost peer.
PEER = textwrap.dedent("""
    import sys
    import torch.distributed as dist
    from training.peer_watch import PeerWatch
    rank, world, port = (int(a) for a in sys.argv[1:4])
    store = dist.TCPStore("127.0.0.1", port, world, is_master=False)
    watch = PeerWatch.start(rank, world, store, "127.0.0.1")
    assert watch.armed.wait(60)
    print("armed", flush=True)
    if sys.stdin.readline().strip() == "bye":
        watch.finish()
""")


def _peer(rank: int, world: int, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", PEER, str(rank), str(world), str(port)], cwd=REPO, env=env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "armed"
    return proc


def test_rank_0_sees_a_killed_peer_and_not_one_that_said_goodbye():
    store = dist.TCPStore("127.0.0.1", 0, 3, is_master=True, wait_for_workers=False)
    watch = PeerWatch.start(0, 3, store, "127.0.0.1")
    finished, killed = _peer(1, 3, store.port), _peer(2, 3, store.port)
    assert watch.armed.wait(60)

    finished.stdin.write("bye\n")
    finished.stdin.close()
    assert finished.wait(60) == 0
    killed.kill()
    killed.wait(60)
    assert watch.lost.wait(60)
    assert watch.lost_rank == 2  # rank 1's connection ended first, after its goodbye


def test_a_rank_sees_rank_0_killed():
    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    rank0 = subprocess.Popen([sys.executable, "-c", PEER, "0", "2", str(store.port)], cwd=REPO, env=env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    watch = PeerWatch.start(1, 2, store, "127.0.0.1")
    assert rank0.stdout.readline().strip() == "armed" and watch.armed.wait(60)
    rank0.kill()
    rank0.wait(60)
    assert watch.lost.wait(60) and watch.lost_rank == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_survivor_saves_when_its_peer_dies_not_at_the_next_collective(tmp_path):
    """Two ranks with no launcher (nothing sends SIGTERM), each step followed by a 10-minute
    pause: rank 1 killed in the pause after step 1. Without the watch the survivor would learn of
    it at step 2's all-reduce, ten minutes on; with it, it saves step 1 and leaves (exit 1)."""
    port, ckpt = str(_free_port()), tmp_path / "ckpt"
    args = ["--steps", "6", "--ckpt-every", "100", "--step-delay", "600", "--ckpt-dir", str(ckpt)]
    ranks = [subprocess.Popen(plain_cmd(*args), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                                      MASTER_PORT=port))
             for r in (0, 1)]
    try:
        survivor, victim = ranks
        for line in survivor.stdout:
            if parse_line(line).get("step") == "1":
                break
        victim.send_signal(signal.SIGKILL)
        out, err = survivor.communicate(timeout=300)  # the guard against a hang, not a speed goal
    finally:
        for proc in ranks:
            if proc.poll() is None:
                proc.kill()
    assert survivor.returncode == 1, err[-2000:]
    assert "rank 1's process is gone" in err
    (saved,) = [parse_line(line) for line in out.splitlines() if "event=checkpoint_saved" in line]
    assert (saved["step"], saved["reason"], saved["rank"]) == ("1", "peer_failure", "0")
    assert os.path.exists(ckpt / saved["file"])


def test_a_rank_waits_for_rank_0s_store_to_listen_and_gives_up_quietly():
    """training.ddp probes rank 0's rendezvous store before init_process_group (torch's client,
    refused once, backs off for up to a second)."""
    from training.ddp import _wait_for_store

    with socket.create_server(("127.0.0.1", 0)) as listening:
        _wait_for_store("127.0.0.1", listening.getsockname()[1], timeout=60)  # returns at once
        listening.accept()[0].close()  # the probe's connection reached the server
    _wait_for_store("127.0.0.1", _free_port(), timeout=0.05)  # nobody listens: returns, init will say so


def test_rank_0_listens_where_its_peers_dial_not_on_every_interface():
    """training/listen.py: torch's TCPStore and a plain create_server(("", 0)) listen on every
    interface; rank 0's store and watch listen on MASTER_ADDR's address when this machine has it."""
    from training.listen import listen_where_dialled

    for addr, expected in (("127.0.0.1", "127.0.0.1"), ("localhost", None)):
        with listen_where_dialled(addr) as listener:
            host = listener.getsockname()[0]
            assert host == expected if expected else ipaddress.ip_address(host).is_loopback
    with listen_where_dialled("192.0.2.1") as listener:  # TEST-NET: no address of this machine
        assert listener.getsockname()[0] in ("0.0.0.0", "::")
    with listen_where_dialled("127.0.0.1") as taken:
        with pytest.raises(OSError):
            listen_where_dialled("127.0.0.1", taken.getsockname()[1]).close()


def test_rank_0s_store_listens_on_loopback_only(monkeypatch):
    """training.ddp builds env://'s store itself for this: torch's own binds `*:PORT`."""
    from tests.sockets import listening
    from training.ddp import _rendezvous_store

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    store = _rendezvous_store(timedelta(seconds=30))
    store.set("k", "v")
    assert [(a, p) for a, p, _ in listening([os.getpid()]) if p == port] == [("127.0.0.1", port)]
    assert dist.TCPStore("127.0.0.1", port, 1, is_master=False).get("default_pg/k") == b"v"
