"""Fault injection on a cluster whose kubelets are not this project's: `kfcockpit pod slow` says in
one line that it cannot, rather than annotate a pod nothing reads (the embedded cluster's side is
tests/local/test_straggler_live.py)."""

from __future__ import annotations

import pytest

from backend.errors import ClusterError
from tui.cli import main


async def test_a_real_cluster_refuses_to_slow_a_pod_and_a_factor_out_of_range(cluster):
    assert cluster.capabilities.slows_pods is None
    with pytest.raises(ClusterError, match="cannot slow a pod"):
        await cluster.slow_pod("lesson-ddp-node-0-1-abcde", 0.5)
    with pytest.raises(ClusterError, match="factor 0 is out of range"):
        await cluster.slow_pod("lesson-ddp-node-0-1-abcde", 0)


def test_the_cli_says_so_in_one_line_and_exits_2(kubeconfig, capsys):
    code = main(["pod", "slow", "lesson-ddp-node-0-1-abcde", "--factor", "0.5", "--backend", "kube",
                 "--kubeconfig", str(kubeconfig), "--context", "fake"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot slow a pod" in err, err
