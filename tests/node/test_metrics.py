"""metrics.k8s.io's CPU rates on the embedded cluster: each from the previous reading of the same
process (or node), kept by the control plane that serves them, and no more than `CpuRates.LIMIT`
of those: the least recently read (a pod gone long ago) is forgotten first (issue 46: no
unbounded process-wide cache keyed by pid)."""

from __future__ import annotations

import os

import pytest

from backend.local.node.metrics import CpuRates, node_metrics, pod_metrics


def test_rates_remember_at_most_their_limit_the_least_recently_read_forgotten():
    now = [100.0]
    rates = CpuRates(limit=3, clock=lambda: now[0])
    for pid in range(10):
        rates.rate(("pod", pid, 0), 1.0, since=10.0)
    assert len(rates) == 3
    now[0] = 102.0
    assert rates.rate(("pod", 9, 0), 2.0, since=12.0) == pytest.approx(0.5)  # since its previous reading
    assert rates.rate(("pod", 0, 0), 2.0, since=12.0) == pytest.approx(2.0 / 12.0)  # forgotten: its whole life


def test_a_process_is_known_by_pid_and_start_and_each_node_by_name():
    rates = CpuRates()
    pod = {"metadata": {"name": "p", "namespace": "default"}}
    for _ in range(3):
        assert pod_metrics(pod, os.getpid(), rates) is not None
        node_metrics("node-0", rates)
        node_metrics("node-1", rates)
    assert len(rates) == 3  # one process, two nodes: repeated readings replace their own
    assert pod_metrics(pod, None, rates) is None
