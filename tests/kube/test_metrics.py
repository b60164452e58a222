"""Pod usage from metrics.k8s.io (what `kubectl top pod` reads), through the real client against
the API server in-process (PodMetrics as the test sets them on its node): summed over containers,
in cores and bytes, only the job's pods; a cluster without metrics-server is "no metrics", not an
error."""

from __future__ import annotations

import pytest

from backend.cluster import Unavailable
from tests.kube.objects import PODMETRICS, PODS, TRAINJOBS, pod_metrics, train_job, worker_pod


async def test_usage_of_a_jobs_pods_summed_over_containers(api, cluster):
    api.put(TRAINJOBS, train_job("lesson-ddp"))
    rank0, rank1, other = (worker_pod("lesson-ddp", 0, phase="Running"), worker_pod("lesson-ddp", 1, phase="Running"),
                           worker_pod("someone-else", 0, phase="Running"))
    for pod in (rank0, rank1, other):
        api.put(PODS, pod)
    api.put(PODMETRICS, pod_metrics(rank0, node={"cpu": "250m", "memory": "1Gi"},
                                    sidecar={"cpu": "1500000n", "memory": "512Ki"}))
    api.put(PODMETRICS, pod_metrics(rank1, node={"cpu": "1", "memory": "200Mi"}))
    api.put(PODMETRICS, pod_metrics(other, node={"cpu": "3", "memory": "3Gi"}))

    usage = await cluster.pod_usage("lesson-ddp")

    assert sorted(usage) == [rank0["metadata"]["name"], rank1["metadata"]["name"]]
    first = usage[rank0["metadata"]["name"]]
    assert first.cpu_cores == pytest.approx(0.2515)
    assert first.memory_bytes == 2**30 + 512 * 2**10
    assert first.at is not None
    assert usage[rank1["metadata"]["name"]].cpu_cores == 1.0
    listed = api.requests_for("GET", "apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
    assert listed and listed[-1].query["labelSelector"] == "jobset.sigs.k8s.io/jobset-name=lesson-ddp"


async def test_usage_of_the_ranks_shown_only(api, cluster):
    """A 512-rank job's pods panel shows a few ranks: only theirs are read (metrics.k8s.io
    samples every pod it lists), by a set-based selector on the completion index."""
    api.put(TRAINJOBS, train_job("big"))
    pods = [worker_pod("big", rank, phase="Running") for rank in range(4)]
    for pod in pods:
        api.put(PODS, pod)
        api.put(PODMETRICS, pod_metrics(pod, node={"cpu": "1", "memory": "1Gi"}))
    usage = await cluster.pod_usage("big", ranks=[0, 2])
    assert sorted(usage) == [pods[0]["metadata"]["name"], pods[2]["metadata"]["name"]]
    listed = api.requests_for("GET", "apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
    assert listed[-1].query["labelSelector"] == ("jobset.sigs.k8s.io/jobset-name=big,"
                                                 "batch.kubernetes.io/job-completion-index in (0,2)")


async def test_a_pod_not_sampled_yet_is_absent_and_a_broken_quantity_is_unknown(api, cluster):
    api.put(TRAINJOBS, train_job("lesson-ddp"))
    rank0, rank1 = worker_pod("lesson-ddp", 0, phase="Running"), worker_pod("lesson-ddp", 1, phase="Pending")
    api.put(PODMETRICS, pod_metrics(rank0, node={"cpu": "lots", "memory": "1Gi"}))
    assert await cluster.pod_usage("lesson-ddp") == {}
    assert rank1  # never sampled: no PodMetrics at all


async def test_a_cluster_without_metrics_server_has_no_metrics(api, cluster):
    api.unserve(PODMETRICS)
    assert await cluster.pod_usage("lesson-ddp") is None
    api.serve(PODMETRICS)
    api.stop()  # a server that stops answering is an error in one line, as every other call
    with pytest.raises(Unavailable, match="does not answer"):
        await cluster.pod_usage("lesson-ddp")
