"""`kfcockpit explain` on the embedded cluster, through its Kubernetes API only (the same reads a
real cluster answers): the lesson's TrainJob (manifests/trainjob.yaml on manifests/runtime.yaml)
taken apart, rank 1's pod piece by piece with who put each there. The rules' upstream functions
are named in tests/backend/test_anatomy.py; here they meet the objects the controllers made."""

from __future__ import annotations

import json

from tests.conformance.conftest import REPO, kfcockpit, lesson_job_yaml

TORCH_ENV = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}


def test_explain_the_lessons_trainjob(kubectl, embedded):
    name = "an-lesson"
    manifests = REPO / "manifests"
    kubectl("apply", "-f", str(manifests / "runtime.yaml"), "-f", str(manifests / "volume.yaml"))
    kubectl("apply", "-f", "-", input=lesson_job_yaml(name, steps=2, step_delay=0))
    try:
        kubectl("wait", "--for=condition=PodScheduled", "pod", "-l",
                f"jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=1",
                "--timeout=300s")
        done = kfcockpit(embedded[0], "explain", name, "-o", "json")
        assert done.returncode == 0, done.stderr
        anatomy = json.loads(done.stdout)
        assert anatomy["rank"] == 1 and anatomy["pod"].startswith(f"{name}-node-0-1-")
        pieces = {(p["kind"], p["name"]): p for p in anatomy["pieces"]}
        pet = {n: p["source"]["by"] for (kind, n), p in pieces.items() if kind == "env" and n.startswith("PET_")}
        # every PET_* the torch plugin injects is the torch plugin's; the runtime's own is the runtime's
        assert pet == {**{n: "torch plugin" for n in TORCH_ENV}, "PET_RDZV_CONF": "TrainingRuntime kfcockpit-torch"}
        assert pieces[("env", "PET_MASTER_ADDR")]["value"] == f"{name}-node-0-0.{name}"
        assert pieces[("volume", "checkpoints")]["source"]["by"] == "kfcockpit.io/lesson"
        assert pieces[("mount", "/checkpoints")]["source"]["by"] == "kfcockpit.io/lesson"
        node = pieces[("node", "node")]
        assert node["source"]["by"] == "scheduler" and node["value"].startswith("kfcockpit-")
        assert pieces[("network", "subdomain")]["value"] == name
        assert pieces[("label", "jobset.sigs.k8s.io/restart-attempt")]["source"]["by"] == "JobSet controller"
        (diff,) = anatomy["patches"]
        assert diff["manager"] == "kfcockpit.io/lesson"
        assert {c["path"] for c in diff["changes"]} == {"replicatedJobs[node] pod.volumes",
                                                        "replicatedJobs[node] pod.containers[node].volumeMounts"}
        titles = [s["title"] for s in anatomy["sections"]]
        assert titles == [f"TrainJob {name}", "TrainingRuntime kfcockpit-torch", f"JobSet {name}", "Jobs", "pods"]

        text = kfcockpit(embedded[0], "explain", name)
        assert text.returncode == 0, text.stderr
        assert "PET_NODE_RANK" in text.stdout and "the framework's, not the platform's" in text.stdout
    finally:
        kubectl("delete", "trainjob", name, "--wait=false")


def test_explain_an_unknown_job_is_one_line_and_exit_2(embedded):
    done = kfcockpit(embedded[0], "explain", "no-such-job")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no TrainJob no-such-job" in done.stderr, done.stderr
