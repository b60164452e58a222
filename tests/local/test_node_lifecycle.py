"""A lost node's pods, step by step as upstream takes them, on the lesson's cluster (two nodes,
--node-monitor-grace-period 4s, --default-unreachable-toleration-seconds 2):

- plugin/pkg/admission/defaulttolerationseconds: a pod created without them gets NoExecute
  tolerations of node.kubernetes.io/not-ready and /unreachable for the cluster's seconds;
- pkg/controller/nodelifecycle: the kubelet's Lease not renewed for the grace period makes the
  node Ready Unknown (kubectl shows NotReady) with a NodeNotReady event, and taints it unreachable;
- pkg/controller/tainteviction: once the toleration runs out the pod is marked DisruptionTarget
  (DeletionByTaintManager) and deleted, with a TaintManagerEviction event; no kubelet confirms the
  deletion, so it stays Terminating (a bare pod is not safe to delete forcefully);
- `node restore`: the node's new kubelet registers it Ready, finds the pod being deleted, ends it,
  and the pod is gone."""

from __future__ import annotations

import json

from backend.local.embedded import Embedded
from tests.local.conftest import kubectl

NODE = "kfcockpit-worker2"


async def test_a_pod_on_a_lost_node_is_evicted_after_its_toleration_and_goes_once_the_node_is_back(
        cluster, home, tmp_path):
    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bystander"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE}, "terminationGracePeriodSeconds": 5,
                 "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "600"]}]}}))
    assert kubectl(home, "apply", "-f", str(manifest)).returncode == 0
    ready = kubectl(home, "wait", "pod/bystander", "--for=condition=Ready", "--timeout=60s")
    assert ready.returncode == 0, ready.stderr
    pod = json.loads(kubectl(home, "get", "pod", "bystander", "-o", "json").stdout)
    assert {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 2} in pod["spec"]["tolerations"]

    embedded = Embedded(home)
    await embedded.fail_node(NODE)
    evicted = kubectl(home, "wait", "pod/bystander", "--for=condition=DisruptionTarget", "--timeout=60s")
    assert evicted.returncode == 0, evicted.stderr
    pod = json.loads(kubectl(home, "get", "pod", "bystander", "-o", "json").stdout)
    assert pod["metadata"].get("deletionTimestamp")  # Terminating: nobody confirms the end
    target = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert target["reason"] == "DeletionByTaintManager"
    assert "NotReady" in kubectl(home, "get", "node", NODE).stdout
    events = json.loads(kubectl(home, "get", "events", "-o", "json").stdout)["items"]
    reasons = {e["reason"] for e in events}
    assert {"NodeNotReady", "TaintManagerEviction"} <= reasons, reasons

    await embedded.restore_node(NODE)
    gone = kubectl(home, "wait", "pod/bystander", "--for=delete", "--timeout=60s")
    assert gone.returncode == 0, gone.stderr
    assert kubectl(home, "wait", f"node/{NODE}", "--for=condition=Ready", "--timeout=60s").returncode == 0
