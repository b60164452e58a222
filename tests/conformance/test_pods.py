"""Pods created through the API (`kubectl run`, a reader pod on a volume): the embedded kubelet
runs their one container as a process here, with restartPolicy, graceful deletion, logs, and a
Status for what it cannot run (core/v1 Pod semantics: pkg/kubelet, CrashLoopBackOff back-off)."""

from __future__ import annotations

import json

import yaml

from tests.conformance.conftest import REPO


def test_kubectl_run_to_completion_and_logs(kubectl):
    kubectl("run", "pd-hello", "--image=busybox", "--restart=Never", "--", "python3", "-c", "print('hello')")
    kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/pd-hello", "--timeout=300s")
    assert kubectl("logs", "pd-hello") == "hello\n"
    state = json.loads(kubectl("get", "pod", "pd-hello", "-o", "jsonpath={.status.containerStatuses[0].state}"))
    assert state["terminated"]["exitCode"] == 0 and state["terminated"]["reason"] == "Completed"
    assert "Completed" in kubectl("get", "pod", "pd-hello")
    kubectl("delete", "pod", "pd-hello")


def test_a_failing_container_is_restarted_with_back_off(kubectl):
    kubectl("run", "pd-crash", "--image=busybox", "--restart=OnFailure", "--", "python3", "-c", "raise SystemExit(3)")
    kubectl("wait", "--for=jsonpath={.status.containerStatuses[0].restartCount}=1", "pod/pd-crash", "--timeout=300s")
    status = json.loads(kubectl("get", "pod", "pd-crash", "-o", "jsonpath={.status.containerStatuses[0]}"))
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["lastState"]["terminated"]["exitCode"] == 3
    kubectl("delete", "pod", "pd-crash", "--grace-period=0", "--force")


def test_graceful_delete_of_a_running_pod(kubectl):
    kubectl("run", "pd-sleeper", "--image=busybox", "--", "python3", "-c",
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: (print('got SIGTERM', flush=True), sys.exit(0)))\n"
            "print('up', flush=True)\ntime.sleep(600)")
    kubectl("wait", "--for=condition=Ready", "pod/pd-sleeper", "--timeout=300s")
    assert kubectl("delete", "pod", "pd-sleeper") == 'pod "pd-sleeper" deleted from default namespace\n'
    assert kubectl("get", "pods", "--field-selector", "metadata.name=pd-sleeper", "-o", "name") == ""


def test_a_reader_pod_sees_the_volume(kubectl):
    kubectl("apply", "-f", str(REPO / "manifests" / "volume.yaml"))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd-reader"},
           "spec": {"restartPolicy": "Never",
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "checkpoints"}},
                                {"name": "scratch", "emptyDir": {}}],
                    "containers": [{"name": "reader", "image": "kfcockpit-base:0.1.0",
                                    "command": ["python3", "-c", "import os, sys; print(os.path.isdir(sys.argv[1]), "
                                                "os.path.isdir(sys.argv[2]))", "/mnt/data", "/scratch"],
                                    "volumeMounts": [{"name": "data", "mountPath": "/mnt/data", "readOnly": True},
                                                     {"name": "scratch", "mountPath": "/scratch"}]}]}}
    kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))
    kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/pd-reader", "--timeout=300s")
    assert kubectl("logs", "pd-reader") == "True True\n"
    kubectl("delete", "pod", "pd-reader")


def test_what_the_kubelet_cannot_run_is_refused(kubectl):
    two = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd-two"},
           "spec": {"containers": [{"name": "a", "image": "x", "command": ["true"]},
                                   {"name": "b", "image": "x", "command": ["true"]}]}}
    err = kubectl.fails("apply", "-f", "-", input=yaml.safe_dump(two))
    assert "is invalid" in err and "exactly one container" in err
    err = kubectl.fails("run", "pd-no-command", "--image=busybox")
    assert "needs a command" in err
