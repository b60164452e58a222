"""The `kubernetes` client and the Kubeflow SDK (kubeflow 0.5 TrainerClient) unchanged against
the embedded cluster: list, get, watch from a resourceVersion (410 Gone when it is too old, as
an API server that compacted it), job logs and status."""

from __future__ import annotations

import pytest

from tests.conformance.conftest import WAIT


def _watch_until(stream, predicate):
    for event in stream:
        if predicate(event):
            return event
    raise AssertionError("the watch ended first")


def test_list_then_watch_resumes_from_the_resource_version(api_client, kubectl):
    from kubernetes import client, watch

    core = client.CoreV1Api(api_client)
    listed = core.list_namespaced_config_map("default")
    kubectl("create", "configmap", "cl-watched", "--from-literal=a=1")
    kubectl("patch", "configmap", "cl-watched", "-p", '{"data":{"a":"2"}}')
    kubectl("delete", "configmap", "cl-watched")
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_config_map, "default", resource_version=listed.metadata.resource_version,
                          field_selector="metadata.name=cl-watched", timeout_seconds=60):
        seen.append((event["type"], (event["object"].data or {}).get("a")))
        if event["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]


def test_a_too_old_resource_version_is_410_gone(api_client):
    from kubernetes import client, watch
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(api_client)
    with pytest.raises(ApiException) as raised:
        # kube-apiserver's watch cache answers a watch from a compacted version with a stream whose
        # one event is the 410 ERROR (storage/cacher/cacher.go Watch: newErrWatcher); the
        # client's Watch raises it.
        for _ in watch.Watch().stream(core.list_namespaced_pod, "default", resource_version="1", timeout_seconds=5):
            pass
    assert raised.value.status == 410


def test_custom_objects(api_client):
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)
    runtimes = custom.list_cluster_custom_object("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")
    assert "torch-distributed" in [r["metadata"]["name"] for r in runtimes["items"]]
    namespaced = custom.get_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "default",
                                                    "trainingruntimes", "kfcockpit-torch")
    assert namespaced["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"] >= 1


def test_kubeflow_sdk_trainer_client(embedded, kubectl):
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import TrainerClient

    trainer = TrainerClient(KubernetesBackendConfig(config_file=str(embedded[1])))
    names = {r.name for r in trainer.list_runtimes()}
    assert "kfcockpit-torch" in names
    kubectl("apply", "-f", "-", input="""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: sdk-job}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    command: [torchrun, --no-python, python3, -c, "import os; print('rank', os.environ['RANK'])"]
""")
    job = trainer.wait_for_job_status("sdk-job", status={"Complete"}, timeout=WAIT)
    assert job.status == "Complete" and job.num_nodes == 2
    assert [s.name for s in sorted(job.steps, key=lambda s: s.name)] == ["node-0", "node-1"]
    assert list(trainer.get_job_logs("sdk-job")) == ["rank 0"]
    assert "sdk-job" in [j.name for j in trainer.list_jobs()]
    trainer.delete_job("sdk-job")


async def test_the_kube_backend_on_the_embedded_cluster(embedded, kubectl):
    """The cockpit's Kubernetes client path (backend/kube) against the embedded API: a webhook
    denial arrives as the admission message it is (not as an RBAC problem), and jobs and pods
    read back through it."""
    import yaml

    from backend.cluster import InvalidResource
    from backend.kube.cluster import KubeCluster
    from backend.models import parse_manifests
    from backend.settings import Settings
    from tests.conformance.conftest import lesson_job_yaml

    cluster = KubeCluster.from_settings(Settings(backend="kube", kubeconfig=embedded[1], context="kfcockpit"))
    body = yaml.safe_load(lesson_job_yaml("cl-denied", steps=2, step_delay=0))
    body["spec"]["runtimePatches"][0]["manager"] = "kfcockpit"
    (job,) = parse_manifests(yaml.safe_dump(body))
    with pytest.raises(InvalidResource) as denied:
        await cluster.apply(job)
    text = str(denied.value)
    assert "admission webhook" in text and "domain-prefixed path" in text and "forbidden for context" not in text

    from tests.conformance.conftest import REPO

    for volume in parse_manifests((REPO / "manifests" / "volume.yaml").read_text()):
        await cluster.apply(volume)
    (job,) = parse_manifests(lesson_job_yaml("cl-kube", steps=3, step_delay=0))
    assert await cluster.apply(job) == "trainjob/cl-kube created"
    from backend.models import JobPhase

    done = await cluster.wait_job("cl-kube", frozenset({JobPhase.COMPLETE, JobPhase.FAILED}), timeout=WAIT)
    assert done.phase == JobPhase.COMPLETE and done.num_nodes == 2
    pods = await cluster.list_pods("cl-kube")
    assert sorted(p.rank for p in pods) == [0, 1] and all(p.phase.value == "Succeeded" for p in pods)
    lines = [line for batch in [b async for b in cluster.stream_logs("cl-kube", follow=False)] for line in batch]
    assert sum("event=done" in line.text for line in lines) == 2
    # The checkpoint browser's reader pod runs on the embedded kubelet as on kind.
    checkpoints = [c for c in await cluster.checkpoints("checkpoints") if c.run == "cl-kube"]
    assert checkpoints and checkpoints[-1].step == 3 and all(c.valid for c in checkpoints)
    await cluster.delete("TrainJob", "cl-kube")
