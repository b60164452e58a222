"""The object model through the real kubectl (issue #32 item 7): server-side apply's field
ownership and conflicts as kube-apiserver answers them (`kubectl apply --server-side`,
--force-conflicts; k8s.io/apimachinery pkg/util/managedfields)."""

from __future__ import annotations

import json

CONFIG = """apiVersion: v1
kind: ConfigMap
metadata:
  name: fo-settings
data:
  lr: "{lr}"
"""


def test_server_side_apply_conflicts_and_force(kubectl):
    kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-", input=CONFIG.format(lr="0.1"))
    err = kubectl.fails("apply", "--server-side", "--field-manager=bob", "-f", "-", input=CONFIG.format(lr="0.2"))
    assert 'conflict with "alice": .data.lr' in err, err
    kubectl("apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-",
            input=CONFIG.format(lr="0.2"))
    managed = json.loads(kubectl("get", "cm", "fo-settings", "--show-managed-fields", "-o",
                                 "jsonpath={.metadata.managedFields}"))
    assert [(e["manager"], e["operation"]) for e in managed] == [("bob", "Apply")], managed
    assert kubectl("get", "cm", "fo-settings", "-o", "jsonpath={.data.lr}") == "0.2"
    kubectl("delete", "cm", "fo-settings")
