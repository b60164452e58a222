"""`Cluster.pod_log` (what the attempt ledger shows when an attempt is chosen) on the embedded
cluster through its API, as `kubectl logs` reads it: a pod's log, and with `previous` the log of
the container's run before it restarted in place (pods/log `previous=true`, `kubectl logs -p`,
kubernetes pkg/kubelet/kuberuntime's previous-container log). A pod without one, or gone, is
NotFound (one line), never an empty answer that reads as a silent rank."""

from __future__ import annotations

import pytest

from backend.connect import connect
from backend.errors import NotFound
from backend.settings import Settings


async def test_a_pods_log_and_its_previous_containers_read_as_kubectl_reads_them(kubectl, embedded):
    kubectl("run", "pd-twice", "--image=busybox", "--restart=OnFailure", "--", "python3", "-c",
            "import os; print('run', os.getpid(), flush=True); raise SystemExit(3)")
    kubectl("run", "pd-once", "--image=busybox", "--restart=Never", "--", "python3", "-c", "print('once')")
    kubectl("wait", "--for=jsonpath={.status.containerStatuses[0].restartCount}=1", "pod/pd-twice", "--timeout=300s")
    kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/pd-once", "--timeout=300s")
    cluster = connect(Settings(home=embedded[0]))
    try:
        previous = await cluster.pod_log("pd-twice", previous=True)
        assert [line.text for line in previous] == kubectl("logs", "pd-twice", "--previous").splitlines()
        assert len(previous) == 1 and previous[0].text.startswith("run ")
        assert [line.text for line in await cluster.pod_log("pd-once")] == ["once"]
        with pytest.raises(NotFound, match="pd-once's container never restarted"):
            await cluster.pod_log("pd-once", previous=True)
        kubectl("delete", "pod", "pd-once")
        with pytest.raises(NotFound, match="pod pd-once is gone"):
            await cluster.pod_log("pd-once")
    finally:
        await cluster.close()
        kubectl("delete", "pod", "pd-twice", "--grace-period=0", "--force", "--ignore-not-found")
