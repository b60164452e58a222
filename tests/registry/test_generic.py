"""The generic registry with every kind's strategy, in-process (kube-apiserver's
registry/generic/registry/store.go and the strategies of pkg/registry): writes into a namespace
that is missing or going, what a delete means (grace, finalizers, the garbage collector's
propagation finalizers), status versus spec, a pod's binding."""

from __future__ import annotations

import pytest

from backend.local.registry.strategy import FOREGROUND_FINALIZER, ORPHAN_FINALIZER
from backend.local.registry.status import ApiError
from tests.controlplane import plane


def _pod(name: str = "p", **spec) -> dict:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x", "command": ["true"]}], **spec}}


def _cm(name: str = "cm", **meta) -> dict:
    return {"metadata": {"name": name, "namespace": "default", **meta}, "data": {"a": "1"}}


def test_no_object_in_a_namespace_that_is_missing_or_terminating():
    client = plane()
    with pytest.raises(ApiError) as missing:
        client.create("ConfigMap", {"metadata": {"name": "x", "namespace": "nowhere"}})
    assert (missing.value.code, missing.value.message) == (404, 'namespaces "nowhere" not found')

    client.create("Namespace", {"metadata": {"name": "going"}})
    kept = client.delete("Namespace", None, "going")  # its `kubernetes` finalizer keeps it, Terminating
    assert kept["status"]["phase"] == "Terminating" and kept["metadata"]["deletionTimestamp"]
    assert kept["spec"]["finalizers"] == ["kubernetes"]
    with pytest.raises(ApiError) as terminating:
        client.create("ConfigMap", {"metadata": {"name": "x", "namespace": "going"}})
    assert terminating.value.code == 403 and "because it is being terminated" in terminating.value.message

    for name in ("default", "kube-system"):
        with pytest.raises(ApiError) as immortal:
            client.delete("Namespace", None, name)
        assert immortal.value.code == 403 and "may not be deleted" in immortal.value.message


def test_a_namespace_goes_once_finalized():
    client = plane()
    client.create("Namespace", {"metadata": {"name": "short"}})
    ns = client.delete("Namespace", None, "short")
    ns["spec"]["finalizers"] = []
    client.finalize("Namespace", ns)  # nothing holds it any more: gone with the write that freed it
    assert client.get("Namespace", None, "short") is None


def test_a_bound_pod_is_deleted_gracefully_an_unbound_one_at_once():
    client = plane()
    client.create("Pod", _pod("pending"))
    assert client.delete("Pod", "default", "pending") is None  # nothing runs it: gone at once

    client.create("Pod", _pod("running", terminationGracePeriodSeconds=7))
    client.bind("default", "running", "n1")
    kept = client.delete("Pod", "default", "running")
    assert kept["metadata"]["deletionGracePeriodSeconds"] == 7 and kept["metadata"]["deletionTimestamp"]
    shorter = client.delete("Pod", "default", "running", grace=2)
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 2
    assert client.delete("Pod", "default", "running", grace=0) is None  # the kubelet's last word


def test_finalizers_hold_an_object_and_none_can_be_added_while_it_goes():
    client = plane()
    client.create("ConfigMap", _cm(finalizers=["example.com/hold"]))
    held = client.delete("ConfigMap", "default", "cm")
    assert held["metadata"]["deletionGracePeriodSeconds"] == 0 and held["metadata"]["finalizers"] == [
        "example.com/hold"]
    held["metadata"]["finalizers"].append("example.com/more")
    with pytest.raises(ApiError) as added:
        client.update("ConfigMap", held)
    assert added.value.code == 422 and "no new finalizers can be added" in added.value.message
    held["metadata"]["finalizers"] = []
    client.update("ConfigMap", held)
    assert client.get("ConfigMap", "default", "cm") is None


@pytest.mark.parametrize("policy, finalizer", [("Orphan", ORPHAN_FINALIZER), ("Foreground", FOREGROUND_FINALIZER)])
def test_propagation_becomes_the_garbage_collectors_finalizer(policy, finalizer):
    client = plane()
    client.create("ConfigMap", _cm())
    kept = client.delete("ConfigMap", "default", "cm", propagation=policy)
    assert kept["metadata"]["finalizers"] == [finalizer]
    # a second delete without a policy keeps the first one's; background takes it back
    assert client.delete("ConfigMap", "default", "cm")["metadata"]["finalizers"] == [finalizer]
    assert client.delete("ConfigMap", "default", "cm", propagation="Background") is None


def test_batch_v1_jobs_orphan_by_default_as_upstream():
    client = plane()
    client.create("Job", {"metadata": {"name": "j", "namespace": "default"},
                          "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                         "containers": [{"name": "c", "command": ["true"]}]}}}})
    assert client.delete("Job", "default", "j")["metadata"]["finalizers"] == [ORPHAN_FINALIZER]


def test_status_and_spec_are_written_apart():
    client = plane()
    created = client.create("Pod", _pod())
    assert created["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    created["status"]["phase"] = "Running"
    created["spec"]["activeDeadlineSeconds"] = 5
    updated = client.update("Pod", created)  # the main resource: spec, never status
    assert (updated["status"]["phase"], updated["spec"]["activeDeadlineSeconds"]) == ("Pending", 5)
    updated["status"]["phase"] = "Running"
    updated["spec"]["activeDeadlineSeconds"] = 9
    status = client.update_status("Pod", updated)  # /status: status, never spec
    assert (status["status"]["phase"], status["spec"]["activeDeadlineSeconds"]) == ("Running", 5)
    status["spec"]["containers"][0]["command"] = ["false"]
    with pytest.raises(ApiError) as fixed:
        client.update("Pod", status)
    assert fixed.value.code == 422 and "pod updates may not change fields" in fixed.value.message


def test_binding_assigns_a_node_once():
    client = plane()
    client.create("Pod", _pod())
    bound = client.bind("default", "p", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["status"]["conditions"][0]["type"] == "PodScheduled"
    with pytest.raises(ApiError) as again:
        client.bind("default", "p", "n1")
    assert again.value.code == 409 and 'already assigned to node "n1"' in again.value.message


def test_kind_defaults():
    client = plane()
    job = client.create("Job", {"metadata": {"name": "j", "namespace": "default"},
                                "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2,
                                         "template": {"spec": {"restartPolicy": "Never",
                                                               "containers": [{"name": "c", "command": ["x"]}]}}}})
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "j"
    assert job["spec"]["backoffLimit"] == 6 and "status" not in job

    jobset = client.create("JobSet", {"metadata": {"name": "js", "namespace": "default"},
                                      "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {
                                          "template": {"spec": {"containers": [{"name": "c", "command": ["x"]}]}}}}}]}})
    rjob = jobset["spec"]["replicatedJobs"][0]
    assert (rjob["replicas"], rjob["template"]["spec"]["completionMode"]) == (1, "Indexed")
    assert rjob["template"]["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert jobset["spec"]["successPolicy"] == {"operator": "All"}

    client.create("StorageClass", {"metadata": {"name": "fast", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "x"})
    claim = client.create("PersistentVolumeClaim", {"metadata": {"name": "c", "namespace": "default"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    assert claim["spec"]["storageClassName"] == "fast" and claim["status"] == {"phase": "Pending"}
    assert claim["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]

    secret = client.create("Secret", {"metadata": {"name": "s", "namespace": "default"}, "stringData": {"k": "v"}})
    assert (secret["type"], secret["data"], "stringData" in secret) == ("Opaque", {"k": "dg=="}, False)
