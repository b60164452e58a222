"""Pods created through the API (`kubectl run`, a reader pod on a volume): the embedded kubelet
runs their one container as a process here, with restartPolicy, graceful deletion, logs, and a
Status for what it cannot run (core/v1 Pod semantics: pkg/kubelet, CrashLoopBackOff back-off)."""

from __future__ import annotations

import json

import pytest
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
    # The first restart is at once, the second after the back-off: waiting in CrashLoopBackOff
    # with one restart counted (waited for, not raced: the restarted run takes its own time).
    kubectl("wait", "--for=jsonpath={.status.containerStatuses[0].state.waiting.reason}=CrashLoopBackOff",
            "pod/pd-crash", "--timeout=300s")
    status = json.loads(kubectl("get", "pod", "pd-crash", "-o", "jsonpath={.status.containerStatuses[0]}"))
    assert status["restartCount"] == 1
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


def test_a_pod_cannot_open_the_clusters_secrets_or_another_namespaces_volume(kubectl, embedded):
    """Found (issue 44): a pod of ns-b read the admin token and the service-account signing key,
    and listed every namespace's volumes; a script opening /checkpoints/x from a config file got
    ENOENT. Each pod now has its own mount namespace (node/confine.py), where the kernel allows,
    and its own PID namespace (node/pidns.py): a running pod of default, its volume mounted, is
    not reachable through /proc/PID/root."""
    from backend.local.layout import Layout
    from backend.local.node import confine, pidns

    if why := confine.available() or pidns.available():
        pytest.skip(f"pods are not confined on this machine: {why}")
    root = Layout(embedded[0]).root
    kubectl("apply", "-f", str(REPO / "manifests" / "volume.yaml"))  # default's checkpoints volume
    kubectl("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/checkpoints", "--timeout=300s")
    default_volume = Layout(embedded[0]).claim_dir("default", "checkpoints")
    (default_volume / "other-namespace.txt").write_text("default's")
    holder = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd-holder"},
              "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "checkpoints"}}],
                       "containers": [{"name": "main", "image": "kfcockpit-base:0.1.0", "command": ["sleep", "600"],
                                       "volumeMounts": [{"name": "data", "mountPath": "/checkpoints"}]}]}}
    kubectl("apply", "-f", "-", input=yaml.safe_dump(holder))
    kubectl("wait", "--for=condition=Ready", "pod/pd-holder", "--timeout=300s")
    holder_pid = kubectl("get", "pod", "pd-holder", "-o",
                         "jsonpath={.status.containerStatuses[0].containerID}").removeprefix("process://")
    forbidden = [root / "pki" / "token", root / "pki" / "service-account.key", default_volume / "other-namespace.txt",
                 f"/proc/{holder_pid}/root/checkpoints/other-namespace.txt"]
    kubectl("create", "namespace", "pd-ns-b")
    volume = yaml.safe_load((REPO / "manifests" / "volume.yaml").read_text())
    volume["metadata"]["namespace"] = "pd-ns-b"
    kubectl("apply", "-f", "-", input=yaml.safe_dump(volume))
    kubectl("create", "configmap", "-n", "pd-ns-b", "app", "--from-literal=config.json={\"out\": \"/checkpoints/x\"}")
    script = ("import json, sys\n"
              "out = json.load(open('/etc/app/config.json'))['out']\n"
              "open(out, 'w').write('from ns-b')\n"
              "for path in sys.argv[1:]:\n"
              "    try:\n        print('read', len(open(path).read()), 'characters')\n"
              "    except OSError as exc:\n        print(type(exc).__name__)\n"
              "print(open(out).read())\n")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd-confined", "namespace": "pd-ns-b"},
           "spec": {"restartPolicy": "Never",
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "checkpoints"}},
                                {"name": "app", "configMap": {"name": "app"}}],
                    "containers": [{"name": "main", "image": "kfcockpit-base:0.1.0",
                                    "command": ["python3", "-c", script, *map(str, forbidden), str(embedded[1])],
                                    "volumeMounts": [{"name": "data", "mountPath": "/checkpoints",
                                                      "subPath": "run-1"},
                                                     {"name": "app", "mountPath": "/etc/app"}]}]}}
    kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))
    kubectl("wait", "-n", "pd-ns-b", "--for=jsonpath={.status.phase}=Bound", "pvc/checkpoints", "--timeout=300s")
    kubectl("wait", "-n", "pd-ns-b", "--for=jsonpath={.status.phase}=Succeeded", "pod/pd-confined", "--timeout=300s")
    assert kubectl("logs", "-n", "pd-ns-b", "pd-confined").split("\n") == \
        ["FileNotFoundError"] * len(forbidden) + ["read 0 characters", "from ns-b", ""]  # the kubeconfig: empty
    ns_b_volume = Layout(embedded[0]).claim_dir("pd-ns-b", "checkpoints")
    assert (ns_b_volume / "run-1" / "x").read_text() == "from ns-b"  # in its subPath
    kubectl("delete", "namespace", "pd-ns-b")
    kubectl("delete", "pod", "pd-holder")
