"""A node's pod slots, as the kubelet's --max-pods: 110 unless `cluster up --max-pods` chose
(a job of 512 ranks needs more than one node's default, bench/tui_scale.py); kept in the
cluster's shape with the nodes' other settings, and read from an older state root's node.json."""

from __future__ import annotations

import json


def test_each_node_holds_the_pods_cluster_up_chose_and_110_otherwise(tmp_path):
    from backend.local import shape
    from backend.local.embedded import Embedded
    from backend.local.fleet import node_resources
    from backend.local.layout import Layout

    home = tmp_path / "home"
    layout = Layout(home)
    assert node_resources(shape.load(layout.shape_file), 0)[1]["pods"] == "110"  # the kubelet's default
    assert Embedded(home).reshape(max_pods=600) is False  # no controller: at its start
    capacity, allocatable = node_resources(shape.load(layout.shape_file), 0)
    assert capacity["pods"] == allocatable["pods"] == "600"


def test_an_older_node_json_keeps_its_size(tmp_path):
    from backend.local import shape
    from backend.local.layout import Layout

    layout = Layout(tmp_path / "home")
    layout.root.mkdir(parents=True)
    (layout.root / "node.json").write_text(json.dumps({"cpu": 3.0, "memory": 2 ** 31, "pods": 600}))
    kept = shape.load(layout.shape_file)
    assert (kept.cpus, kept.max_pods, kept.nodes) == ("3", 600, 2)
