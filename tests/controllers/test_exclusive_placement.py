"""JobSet's exclusive placement (kubernetes-sigs/jobset v0.12.0: labelAndAnnotateObject in
pkg/controllers/jobset_controller.go copies `alpha.jobset.sigs.k8s.io/exclusive-topology` onto
the Jobs and their pods; pkg/webhooks/pod_webhook.go gives the leader pod a required affinity to
its own Job's pods and anti-affinity to other Jobs', and each follower its leader's domain): one
Job per node; a third job finds no node ("didn't match pod anti-affinity rules")."""

from __future__ import annotations

from tests.controllers.test_training import _cluster, _manifest
from tests.controlplane import eventually, running

EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
HOSTNAME = "kubernetes.io/hostname"


def _exclusive_runtime(client) -> None:
    runtime = _manifest("runtime.yaml")
    runtime["metadata"] = {"name": "exclusive", "namespace": "default"}
    runtime["spec"]["template"]["metadata"] = {"annotations": {EXCLUSIVE: HOSTNAME}}
    client.create("TrainingRuntime", runtime)


def _job(client, name: str) -> None:
    job = _manifest("trainjob.yaml")
    job["metadata"] = {"name": name, "namespace": "default"}
    job["spec"]["runtimeRef"]["name"] = "exclusive"
    job["spec"]["trainer"]["resourcesPerNode"] = {}
    client.create("TrainJob", job)


async def test_each_job_takes_a_node_of_its_own_and_a_third_waits():
    client, controllers = _cluster(nodes=2)
    for node in client.list("Node"):
        node["metadata"]["labels"] = {HOSTNAME: node["metadata"]["name"]}
        client.update("Node", node)
    _exclusive_runtime(client)
    async with running(*controllers):
        for name in ("first", "second"):
            _job(client, name)

        def placed() -> dict[str, set[str]] | None:
            pods = client.list("Pod", "default")
            if len(pods) < 4 or not all(p["spec"].get("nodeName") for p in pods):
                return None
            nodes: dict[str, set[str]] = {}
            for pod in pods:
                nodes.setdefault(pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"], set()).add(
                    pod["spec"]["nodeName"])
            return nodes
        nodes = await eventually(client, placed)
        assert all(len(found) == 1 for found in nodes.values())  # a job's pods share its node
        assert nodes["first"] != nodes["second"]  # and no other job's
        leader = next(p for p in client.list("Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": "first"})
                      if p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0")
        assert leader["metadata"]["annotations"][EXCLUSIVE] == HOSTNAME

        _job(client, "third")

        def waiting() -> str | None:
            pods = client.list("Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": "third"})
            found = [c for p in pods for c in (p.get("status") or {}).get("conditions") or []
                     if c["type"] == "PodScheduled" and c["status"] == "False"]
            return found[0]["message"] if found else None
        message = await eventually(client, waiting)
        assert message.startswith("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."), message
