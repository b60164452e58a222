"""`kfcockpit goodput JOB --attempts` on the embedded cluster, after the fact, through its API
only: the lesson's job, rank 1's pod deleted mid-training (kubectl delete), then complete. The
ledger has two attempts: the first ended by that deletion (rank, pod, node), the second completed;
one restart of the runtime's maxRestarts 3 used, as the JobSet's status says."""

from __future__ import annotations

import json

from tests.conformance.conftest import REPO, kfcockpit, lesson_job_yaml

LABEL = "jobset.sigs.k8s.io/jobset-name"


def test_the_attempt_ledger_after_a_deleted_pod(kubectl, embedded):
    name = "at-lesson"
    manifests = REPO / "manifests"
    kubectl("apply", "-f", str(manifests / "runtime.yaml"), "-f", str(manifests / "volume.yaml"))
    kubectl("apply", "-f", "-", input=lesson_job_yaml(name, steps=40, step_delay=0.1))
    selector = f"{LABEL}={name}"
    try:
        kubectl("wait", "--for=jsonpath={.status.phase}=Running", "pod", "-l", selector, "--timeout=300s")
        follow = kubectl.popen("logs", "-f", "-l", selector, "--max-log-requests=4")
        try:
            for line in follow.stdout:
                if "event=checkpoint_saved" in line:
                    break
        finally:
            follow.kill()
            follow.wait()
        victim = kubectl("get", "pods", "-l", f"{selector},batch.kubernetes.io/job-completion-index=1", "-o",
                         "jsonpath={.items[0].metadata.name}")
        node = kubectl("get", "pod", victim, "-o", "jsonpath={.spec.nodeName}")
        kubectl("delete", "pod", victim)
        kubectl("wait", "--for=condition=Complete", f"trainjob/{name}", "--timeout=300s")

        done = kfcockpit(embedded[0], "goodput", name, "--attempts", "-o", "json")
        assert done.returncode == 0, done.stderr
        ledger = json.loads(done.stdout)
        first, second = ledger["attempts"]
        assert first["why"] == f"rank 1 deleted: pod {victim} on {node} (kubectl delete, a kill, or R)"
        assert victim in first["pods"] and first["first_step"] == 1 and first["end"] == second["start"]
        assert second["why"] == "completed" and victim not in second["pods"]
        assert kubectl("get", "jobset", name, "-o", "jsonpath={.status.restarts}") == "1"
        assert (ledger["restarts_used"], ledger["max_restarts"], ledger["restarts_left"]) == (1, 3, 2)

        table = kfcockpit(embedded[0], "goodput", name, "--attempts")
        assert table.returncode == 0, table.stderr
        assert "restarts: 1 of 3 used" in table.stdout and f"rank 1 deleted: pod {victim}" in table.stdout
    finally:
        kubectl("delete", "trainjob", name, "--wait=false")
