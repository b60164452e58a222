"""What the embedded cluster refuses, each with the Status a Kubernetes API server would send:
the Trainer v2.3 admission rules and CRD defaults (trainer v2.3.0 pkg/webhooks/trainjob_webhook.go,
pkg/runtime/framework/plugins/jobset/jobset.go IsDomainPrefixedPath, manifests/base/crds), strict
field validation, what is not implemented (named), bad requests, and no credential."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import pytest
import yaml

from tests.conformance.conftest import lesson_job_yaml


def _job(name: str, **spec) -> str:
    body = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 1, "command": ["python3", "-c", "print('ok')"]}, **spec}}
    return yaml.safe_dump(body)


def test_runtime_ref_defaults_to_a_cluster_training_runtime(kubectl):
    """The CRD defaults runtimeRef.kind to ClusterTrainingRuntime and apiGroup to trainer.kubeflow.org."""
    kubectl("apply", "-f", "-", input=_job("rf-default", suspend=True))
    ref = json.loads(kubectl("get", "trainjob", "rf-default", "-o", "jsonpath={.spec.runtimeRef}"))
    assert ref == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": "torch-distributed"}
    assert kubectl("get", "trainjob", "rf-default", "-o", "jsonpath={.spec.managedBy}") == \
        "trainer.kubeflow.org/trainjob-controller"
    # ...so the lesson's namespaced runtime, named without a kind, is not found.
    body = yaml.safe_load(lesson_job_yaml("rf-namespaced", steps=1, step_delay=0))
    del body["spec"]["runtimeRef"]["kind"]
    err = kubectl.fails("apply", "-f", "-", input=yaml.safe_dump(body))
    assert 'clustertrainingruntimes.trainer.kubeflow.org "kfcockpit-torch" not found' in err
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in err
    kubectl("delete", "trainjob", "rf-default")


def test_suspended_trainjob_starts_no_pod_until_resumed(kubectl):
    kubectl("apply", "-f", "-", input=_job("rf-suspended", suspend=True))
    conditions = json.loads(kubectl("get", "trainjob", "rf-suspended", "-o", "jsonpath={.status.conditions}"))
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [("Suspended", "True", "Suspended")]
    assert kubectl("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=rf-suspended", "-o", "name") == ""
    kubectl("patch", "trainjob", "rf-suspended", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    kubectl("wait", "--for=condition=Complete", "trainjob/rf-suspended", "--timeout=300s")
    conditions = json.loads(kubectl("get", "trainjob", "rf-suspended", "-o", "jsonpath={.status.conditions}"))
    assert ("Suspended", "False", "Resumed") in [(c["type"], c["status"], c["reason"]) for c in conditions]
    assert kubectl("logs", "-l", "jobset.sigs.k8s.io/jobset-name=rf-suspended") == "ok\n"
    kubectl("delete", "trainjob", "rf-suspended")


def test_admission_and_validation_refusals(kubectl):
    body = yaml.safe_load(lesson_job_yaml("rf-manager", steps=1, step_delay=0))
    body["spec"]["runtimePatches"][0]["manager"] = "kfcockpit"  # not a domain-prefixed path
    err = kubectl.fails("apply", "-f", "-", input=yaml.safe_dump(body))
    assert "denied the request" in err and \
        'spec.runtimePatches.manager: Invalid value: "kfcockpit": must be a domain-prefixed path' in err

    err = kubectl.fails("apply", "-f", "-", input=_job("rf-zero").replace("numNodes: 1", "numNodes: 0"))
    assert "is invalid" in err and "numNodes must be at least 1" in err
    err = kubectl.fails("apply", "-f", "-", input=_job("9starts-with-digit"))
    # the TrainJob CRD's CEL rule on the root (trainer v2.3.0 manifests/base/crds): a `<nil>` field
    assert '"9starts-with-digit" is invalid: <nil>: Invalid value: metadata.name must match RFC 1035 DNS label format' \
        in err

    err = kubectl.fails("apply", "--validate=strict", "-f", "-", input=_job("rf-strict", bogusField=1))
    assert 'unknown field "spec.bogusField"' in err
    kubectl("apply", "--validate=false", "-f", "-", input=_job("rf-lenient", suspend=True, bogusField=1))
    kubectl("delete", "trainjob", "rf-lenient")

    err = kubectl.fails("create", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "rf-jobset"},
        "spec": {"replicatedJobs": []}}))
    assert "spec.replicatedJobs: Required value" in err  # JobSets are run here too (JobSet's controller)
    err = kubectl.fails("create", "deployment", "rf-deploy", "--image=busybox")
    assert "deployments" in err  # a kind the embedded cluster does not serve
    err = kubectl.fails("-n", "rf-missing-namespace", "create", "configmap", "x", "--from-literal=a=b")
    assert 'namespaces "rf-missing-namespace" not found' in err
    err = kubectl.fails("get", "pods", "-l", "a in (b")
    assert "unable to parse requirement" in err
    err = kubectl.fails("get", "pods", "--field-selector", "spec.bogus=1")
    assert "field label not supported: spec.bogus" in err


def test_unserved_subresources_are_refused_by_name(embedded):
    for sub in ("exec", "attach", "portforward"):
        status = _request(embedded[1], "POST", f"/api/v1/namespaces/default/pods/any/{sub}")
        assert status["code"] == 405 and f"pods/{sub} is not implemented" in status["message"]
    nodes = _request(embedded[1], "GET", "/api/v1/nodes")
    node = nodes["items"][0]["metadata"]["name"]
    status = _request(embedded[1], "GET", f"/api/v1/nodes/{node}/proxy")
    assert status["code"] == 405 and "nodes/proxy is not implemented" in status["message"]


def _kubeconfig(path):
    config = yaml.safe_load(path.read_text())
    cluster = config["clusters"][0]["cluster"]
    token = config["users"][0]["user"]["token"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    return cluster["server"], token, context


def _request(kubeconfig, method: str, path: str, body: bytes | None = None, token: str | None = "use",
             content_type: str = "application/json") -> dict:
    server, real_token, context = _kubeconfig(kubeconfig)
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {real_token if token == 'use' else token}"
    request = urllib.request.Request(server + path, data=body, method=method, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, context=context, timeout=60) as response:  # noqa: S310 - the test's own server
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return json.loads(exc.read())


def test_every_request_needs_the_token(embedded):
    for token in (None, "wrong"):
        status = _request(embedded[1], "GET", "/api/v1/namespaces/default/pods", token=token)
        assert (status["code"], status["reason"]) == (401, "Unauthorized")
    assert _request(embedded[1], "GET", "/api/v1/namespaces/default/pods")["kind"] == "PodList"
    server = _kubeconfig(embedded[1])[0]
    assert server.startswith("https://127.0.0.1:")
    assert oct(embedded[1].stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("body, content_type, code, reason", [
    (b"{not json", "application/json", 400, "BadRequest"),
    (b"[1, 2]", "application/json", 400, "BadRequest"),
    (b"x" * (3 * 1024 * 1024 + 1), "application/json", 413, "RequestEntityTooLarge"),
    (b"<xml/>", "application/xml", 415, "UnsupportedMediaType"),
])
def test_bad_bodies_get_a_status_and_lose_nothing(embedded, kubectl, body, content_type, code, reason):
    before = kubectl("get", "trainingruntimes,clustertrainingruntimes", "-A", "-o", "name")
    status = _request(embedded[1], "POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs",
                      body, content_type=content_type)
    assert (status["kind"], status["code"], status["reason"]) == ("Status", code, reason)
    assert kubectl("get", "trainingruntimes,clustertrainingruntimes", "-A", "-o", "name") == before


def test_active_deadline_fails_the_job_and_stops_its_pods(kubectl):
    """trainer v2.3.0 TrainJobSpec.activeDeadlineSeconds: once reached, running pods are
    terminated and the TrainJob is Failed with reason DeadlineExceeded."""
    body = yaml.safe_load(_job("rf-deadline", activeDeadlineSeconds=3))
    body["spec"]["trainer"]["command"] = ["python3", "-c", "import time; print('started', flush=True); time.sleep(600)"]
    kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
    kubectl("wait", "--for=condition=Failed", "trainjob/rf-deadline", "--timeout=300s")
    conditions = json.loads(kubectl("get", "trainjob", "rf-deadline", "-o", "jsonpath={.status.conditions}"))
    assert [(c["type"], c["reason"]) for c in conditions] == [("Failed", "DeadlineExceeded")]
    phases = kubectl("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=rf-deadline", "-o",
                     "jsonpath={.items[*].status.phase}")
    assert phases in ("", "Failed")  # terminated, never left running
    kubectl("delete", "trainjob", "rf-deadline")


def test_env_from_configmaps_and_secrets(kubectl):
    """core/v1 EnvVarSource and EnvFromSource, as upstream examples use them for tokens and
    settings; a missing one leaves the container waiting in CreateContainerConfigError, as a
    kubelet does, and it runs once the Secret is there."""
    kubectl("create", "configmap", "rf-settings", "--from-literal=LR=0.01", "--from-literal=STEPS=40")
    kubectl("create", "secret", "generic", "rf-token", "--from-literal=HF_TOKEN=s3cr3t")
    body = yaml.safe_load(_job("rf-env"))
    body["spec"]["trainer"]["command"] = ["python3", "-c", "import os; print(os.environ['HF_TOKEN'], "
                                          "os.environ['CFG_LR'], os.environ['STEPS'])"]
    body["spec"]["trainer"]["env"] = [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "rf-token", "key": "HF_TOKEN"}}},
        {"name": "STEPS", "valueFrom": {"configMapKeyRef": {"name": "rf-settings", "key": "STEPS"}}},
        {"name": "CFG_LR", "valueFrom": {"configMapKeyRef": {"name": "rf-settings", "key": "LR"}}}]
    kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
    kubectl("wait", "--for=condition=Complete", "trainjob/rf-env", "--timeout=300s")
    assert kubectl("logs", "-l", "jobset.sigs.k8s.io/jobset-name=rf-env") == "s3cr3t 0.01 40\n"

    body["metadata"]["name"] = "rf-env-missing"
    body["spec"]["trainer"]["env"][0]["valueFrom"]["secretKeyRef"]["name"] = "rf-no-such-secret"
    kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
    selector = "jobset.sigs.k8s.io/jobset-name=rf-env-missing"
    kubectl("wait", "--for=jsonpath={.status.containerStatuses[0].state.waiting.reason}=CreateContainerConfigError",
            "pod", "-l", selector, "--timeout=300s")
    message = kubectl("get", "pods", "-l", selector, "-o",
                      "jsonpath={.items[0].status.containerStatuses[0].state.waiting.message}")
    assert "secret 'rf-no-such-secret' not found" in message
    kubectl("create", "secret", "generic", "rf-no-such-secret", "--from-literal=HF_TOKEN=late")
    kubectl("wait", "--for=condition=Complete", "trainjob/rf-env-missing", "--timeout=300s")
    kubectl("delete", "trainjob", "rf-env", "rf-env-missing")
    kubectl("delete", "secret", "rf-no-such-secret")
    kubectl("delete", "configmap", "rf-settings")
    kubectl("delete", "secret", "rf-token")


def test_configmap_and_secret_volumes_are_files(kubectl):
    kubectl("create", "configmap", "rf-files", "--from-literal=config.yaml=lr: 0.01")
    body = yaml.safe_load(_job("rf-files"))
    # Mount paths are emulated by rewriting them where a whole argument or env value names them.
    body["spec"]["trainer"]["command"] = ["python3", "-c", "import sys; print(open(sys.argv[1]).read())",
                                          "/etc/train/config.yaml"]
    body["spec"]["runtimePatches"] = [{"manager": "example.io/settings", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
            "volumes": [{"name": "settings", "configMap": {"name": "rf-files"}}],
            "containers": [{"name": "node", "volumeMounts": [{"name": "settings", "mountPath": "/etc/train"}]}],
        }}}}}]}}}}]
    kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
    kubectl("wait", "--for=condition=Complete", "trainjob/rf-files", "--timeout=300s")
    assert kubectl("logs", "-l", "jobset.sigs.k8s.io/jobset-name=rf-files") == "lr: 0.01\n"
    kubectl("delete", "trainjob", "rf-files")
    kubectl("delete", "configmap", "rf-files")


def test_kubectl_names_an_unknown_kind_and_selects_by_integer_labels(kubectl):
    """kubectl's client-side validation reads /openapi/v2 in gnostic's protobuf (client-go
    OpenAPISchema, application/com.github.proto-openapi.spec.v2@v1.0+protobuf); served so, an
    unknown kind gets upstream kubectl's "no matches for kind" (not a protobuf parse error).
    Label selectors with `>` and `<` are apimachinery labels.Parse's GreaterThan and LessThan;
    a ConfigMap over 1 MiB is refused as ValidateConfigMap refuses it."""
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"
    err = kubectl.fails("apply", "-f", "-", input=widget)
    assert 'no matches for kind "Widget" in version "example.com/v1"' in err and "proto" not in err
    for index in (5, 25):
        kubectl("create", "configmap", f"idx-{index}", f"--from-literal=i={index}")
        kubectl("label", "configmap", f"idx-{index}", f"idx={index}")
    assert kubectl("get", "configmaps", "-l", "idx>20", "-o", "name").split() == ["configmap/idx-25"]
    assert kubectl("get", "configmaps", "-l", "idx<20", "-o", "name").split() == ["configmap/idx-5"]
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "too-big"}, "data": {"a": "x" * (1 << 20),
                                                                                        "b": "y"}}
    err = kubectl.fails("create", "-f", "-", input=json.dumps(big))
    assert 'ConfigMap "too-big" is invalid: []: Too long: may not be more than 1048576 bytes' in err
