"""The object model through the real kubectl (issue #32 items 7, 8 and 10): server-side apply's
field ownership and conflicts as kube-apiserver answers them (`kubectl apply --server-side`,
--force-conflicts), `kubectl patch` of a custom resource refused for its default strategic type
(apiextensions-apiserver customresource_handler.go), `--validate=warn` warnings
(handlers/rest.go fieldValidation), paging (`kubectl get --chunk-size`, storage/etcd3 GetList's
continue tokens) and label values as objectmeta.go validates them."""

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


def test_strategic_patch_of_a_custom_resource_is_refused(kubectl):
    err = kubectl.fails("patch", "trainingruntime", "kfcockpit-torch", "-p", '{"metadata":{"labels":{"a":"b"}}}')
    assert "UnsupportedMediaType" in err or "unknown format" in err or "415" in err, err


def test_validate_warn_warns_of_unknown_fields(kubectl):
    done = kubectl.run("create", "--validate=warn", "-f", "-", input=CONFIG.format(lr="1") + "bogus: 1\n")
    assert done.returncode == 0, done.stderr
    assert 'unknown field "bogus"' in done.stderr, done.stderr
    kubectl("delete", "cm", "fo-settings")


def test_chunked_lists_and_label_values(kubectl):
    for i in range(5):
        kubectl("create", "configmap", f"fo-page-{i}", "--from-literal=i=1")
    names = kubectl("get", "cm", "--chunk-size=2", "-o", "name", "-l", "").split()
    assert [n for n in names if n.startswith("configmap/fo-page-")] == [f"configmap/fo-page-{i}" for i in range(5)]
    err = kubectl.fails("label", "cm", "fo-page-0", "team=two words")
    assert "a valid label must be an empty string" in err or "invalid label value" in err, err
    kubectl("delete", "cm", *[f"fo-page-{i}" for i in range(5)])
