"""A learner's command line end to end on the embedded cluster: kubectl for what kubectl does
(apply, wait, get, delete), kfcockpit for what it does not (merged logs, checkpoints, snapshots)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.local.conftest import MANIFESTS, REPO, WAIT, cli, kubectl, lesson_job
from training.logfmt import step_and_loss


def test_apply_get_logs_wait_checkpoints_snapshot_delete(home, cluster):
    applied = kubectl(home, "apply", "-f", str(MANIFESTS / "runtime.yaml"), "-f", str(MANIFESTS / "volume.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.split("\n")[:2] == [  # the runtime was installed at start, without kubectl's annotation
        "trainingruntime.trainer.kubeflow.org/kfcockpit-torch configured", "persistentvolumeclaim/checkpoints created"]
    job = yaml.safe_dump(lesson_job(steps=15, step_delay=0.02).to_manifest())
    env = dict(os.environ, KFCOCKPIT_HOME=str(home), PYTHONPATH=str(REPO))
    kfcockpit = str(Path(sys.executable).parent / "kfcockpit")
    created = subprocess.run([str(Path(sys.executable).parent / "kubectl"), "apply", "-f", "-"], input=job,
                             env=dict(os.environ, KUBECONFIG=str(home / "kubeconfig")),
                             capture_output=True, text=True, timeout=WAIT)
    assert created.stdout == "trainjob.trainer.kubeflow.org/lesson-ddp created\n", created.stderr

    # A reader that leaves after one line (`| head -1`) ends the follow quietly.
    follow = subprocess.Popen([kfcockpit, "logs", "lesson-ddp", "-f"], env=env, cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = follow.stdout.readline()
    follow.stdout.close()
    assert follow.wait(timeout=WAIT) == 0 and "Traceback" not in follow.stderr.read()
    assert first.startswith("lesson-ddp-node-0-")

    waited = kubectl(home, "wait", "trainjob/lesson-ddp", "--for", "condition=Complete", f"--timeout={WAIT:.0f}s")
    assert waited.returncode == 0 and "condition met" in waited.stdout, waited.stderr
    pods = json.loads(kubectl(home, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=lesson-ddp",
                              "-o", "json").stdout)["items"]
    assert sorted((p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"], p["status"]["phase"])
                  for p in pods) == [("0", "Succeeded"), ("1", "Succeeded")]
    logs = cli(home, "logs", "lesson-ddp").stdout.splitlines()
    assert sum("event=done" in line for line in logs) == 2
    last_steps: dict[str, int] = {}  # a listed pod carries no last step: its log has it
    for line in logs:
        if found := step_and_loss(line):
            last_steps[line.split()[0]] = found[0]
    assert sorted(last_steps.values()) == [15, 15]
    checkpoints = json.loads(cli(home, "checkpoints", "checkpoints", "-o", "json").stdout)
    assert checkpoints[-1]["step"] == 15 and all(c["valid"] for c in checkpoints)
    snapped = cli(home, "snapshot", "create", "checkpoints", "done-15")
    assert snapped.returncode == 0 and "1 run(s) with metrics" in snapped.stdout
    status = cli(home, "cluster", "status")
    assert status.returncode == 0 and "NO " not in status.stdout

    assert kubectl(home, "delete", "trainjob", "lesson-ddp").returncode == 0
    assert json.loads(kubectl(home, "get", "trainjobs", "-o", "json").stdout)["items"] == []
    assert cli(home, "checkpoints", "checkpoints").returncode == 0  # the volume outlives the job
