"""bench/goodput.py's torchrun configurations (issue 49: each peer as its docs recommend): the words
each launch gets, read against torch 2.13's torch/distributed/run.py."""

from __future__ import annotations

from bench.goodput import C10D_ENV, Schedule, torchrun_options


def _option(options: list[str], name: str) -> str:
    return options[options.index(name) + 1]


def test_the_c10d_configuration_is_run_py_fault_tolerant_example_with_a_fresh_store_per_launch():
    schedule = Schedule(kills=2, every=20)
    first, second = torchrun_options("torchrun-c10d", schedule), torchrun_options("torchrun-c10d", schedule)
    assert "--standalone" not in first
    assert _option(first, "--rdzv-backend") == "c10d" and _option(first, "--max-restarts") == "4"
    assert _option(first, "--rdzv-conf") == "join_timeout=30,close_timeout=5"
    assert _option(first, "--monitor-interval") == "0.1"
    # a relaunch (the bench's workaround for a hung restart) meets on a store of its own
    assert _option(first, "--rdzv-endpoint").startswith("127.0.0.1:")
    assert _option(first, "--rdzv-endpoint") != _option(second, "--rdzv-endpoint")
    assert _option(first, "--rdzv-id") != _option(second, "--rdzv-id")
    # the workers' own store, not the agent's: the workaround of pytorch/pytorch#135712
    assert C10D_ENV == {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def test_the_default_configuration_stays_standalone():
    options = torchrun_options("torchrun-standalone", Schedule(kills=5, every=60))
    assert options == ["--standalone", "--nproc-per-node", "2", "--max-restarts", "7"]
