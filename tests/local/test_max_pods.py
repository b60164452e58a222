"""The node's pod slots, as the kubelet's --max-pods: 110 unless `cluster up --max-pods` chose
(a job of 512 ranks needs more than one node's default, bench/tui_scale.py)."""

from __future__ import annotations


def test_the_node_holds_the_pods_cluster_up_chose_and_110_otherwise(tmp_path):
    from backend.local.controller import MAX_PODS, node_resources
    from backend.local.embedded import Embedded
    from backend.local.layout import Layout

    home = tmp_path / "home"
    assert MAX_PODS == 110 and node_resources(Layout(home))[1]["pods"] == "110"  # the kubelet's default
    assert Embedded(home).size_node(None, None, max_pods=600) is False  # no controller: at its start
    capacity, allocatable = node_resources(Layout(home))
    assert capacity["pods"] == allocatable["pods"] == "600"
