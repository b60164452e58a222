"""TrainJob progress as Trainer v2.3.0 has it with the TrainJobStatus gate on, in-process: the
runtime plugin (pkg/runtime/framework/plugins/trainjobstatus) gives the trainer containers the
server's URL, CA and token paths and a projected volume (a token for the TrainJob's audience, the
CA from `<job>-tls-config`); the status server (pkg/statusserver server.go, auth.go) takes a
report only with such a token and applies it to status.trainerStatus, answering bad input as
upstream does. The training loop's side is tests/training/test_monitors.py."""

from __future__ import annotations

import json
import time

import pytest
from aiohttp.test_utils import TestClient, TestServer

from backend.local.apiserver.trainer_status import TrainerStatusServer
from backend.local.controllers.trainjob_status import StatusServer
from backend.local.node import podspec
from backend.local.registry.events import Events
from backend.local.controllers.trainjob import TrainJobController
from backend.local.registry.tokens import TokenIssuer, trainer_status_audience
from tests.controlplane import eventually, running
from tests.controllers.test_training import _cluster, _trainjob

SERVER = StatusServer("https://127.0.0.1:9443", "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n")
REPORT = {"trainerStatus": {"progressPercentage": 40, "estimatedRemainingSeconds": 75,
                            "metrics": [{"name": "loss", "value": "0.25"}],
                            "lastUpdatedTime": "2026-12-01T20:00:00Z"}}


def _status_cluster():
    client, controllers = _cluster()
    trainjob = TrainJobController(client, Events(client, host="test").recorder("trainjob-controller"),
                                  clock=lambda: 0.0, status_server=lambda: SERVER)
    return client, (trainjob, *controllers[1:])


async def test_the_plugin_gives_trainer_containers_the_url_ca_and_token_of_their_trainjob():
    client, controllers = _status_cluster()
    async with running(*controllers):
        _trainjob(client)
        jobset = await eventually(client, lambda: client.get("JobSet", "default", "lesson-ddp"))
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (node,) = [c for c in pod["containers"] if c["name"] == "node"]
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == \
        "https://127.0.0.1:9443/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/lesson-ddp/status"
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    assert {"name": "kubeflow-trainer-token", "mountPath": "/var/run/secrets/kubeflow/trainer",
            "readOnly": True} in node["volumeMounts"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "kubeflow-trainer-token"]
    token, ca = volume["projected"]["sources"]
    assert token["serviceAccountToken"] == {
        "audience": "trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/lesson-ddp/status",
        "expirationSeconds": 3600, "path": "token"}
    assert ca["configMap"] == {"name": "lesson-ddp-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    config = client.get("ConfigMap", "default", "lesson-ddp-tls-config")
    assert config["data"] == {"ca.crt": SERVER.ca_cert}
    assert config["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"

    # The kubelet's side: the projected files, the token minted for the source's audience
    issuer = TokenIssuer(b"k" * 32)
    files = podspec.projected_files(volume, lambda kind, name: client.get(kind, "default", name)["data"],
                                    lambda audience, seconds: issuer.mint(audience, seconds,
                                                                          "system:serviceaccount:default:default", 0))
    assert files["ca.crt"] == SERVER.ca_cert
    assert issuer.check(files["token"], trainer_status_audience("default", "lesson-ddp"), 3599) is not None
    assert issuer.check(files["token"], trainer_status_audience("default", "lesson-ddp"), 3601) is None  # expired


@pytest.fixture
async def status_server():
    client, controllers = _cluster()
    async with running(*controllers):
        _trainjob(client)
        await eventually(client, lambda: client.get("JobSet", "default", "lesson-ddp"))
    issuer = TokenIssuer(b"k" * 32)
    server = TrainerStatusServer(client, issuer)
    http = TestClient(TestServer(server.app))
    await http.start_server()

    async def post(path: str, body, token: str | None, scheme: str = "Bearer") -> tuple[int, dict]:
        headers = {"Authorization": f"{scheme} {token}"} if token is not None else {}
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        async with http.post(path, data=data, headers=headers) as response:
            return response.status, await response.json()

    def token(namespace: str = "default", name: str = "lesson-ddp", audience: str | None = None) -> str:
        return issuer.mint(audience or trainer_status_audience(namespace, name), 3600,
                           f"system:serviceaccount:{namespace}:default", time.time())

    try:
        yield client, post, token
    finally:
        await http.close()


PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/lesson-ddp/status"


async def test_a_report_with_the_trainjobs_token_lands_in_its_trainer_status(status_server):
    client, post, token = status_server
    code, body = await post(PATH, REPORT, token())
    assert (code, body) == (200, REPORT)  # server.go: the parsed payload echoed
    assert client.get("TrainJob", "default", "lesson-ddp")["status"]["trainerStatus"] == REPORT["trainerStatus"]
    code, body = await post(PATH, {}, token())  # no trainerStatus: success, nothing applied
    assert code == 200 and client.get("TrainJob", "default", "lesson-ddp")["status"]["trainerStatus"] == \
        REPORT["trainerStatus"]


@pytest.mark.parametrize("case", ["none", "garbage", "other job's", "other namespace's", "not bearer"])
async def test_a_report_without_the_trainjobs_token_is_forbidden(status_server, case):
    client, post, token = status_server
    given = {"none": None, "garbage": "abc.def", "other job's": token(name="other"),
             "other namespace's": token(namespace="ns2", audience=trainer_status_audience("default", "lesson-ddp")),
             "not bearer": token()}[case]
    code, body = await post(PATH, REPORT, given, scheme="Basic" if case == "not bearer" else "Bearer")
    assert code == 403 and body["reason"] == "Forbidden"
    assert "trainerStatus" not in client.get("TrainJob", "default", "lesson-ddp").get("status", {})


async def test_bad_reports_answer_as_upstreams_server(status_server):
    client, post, token = status_server
    code, body = await post(PATH, b"{not json", token())
    assert (code, body["message"]) == (422, "Invalid payload")
    code, body = await post(PATH, {"trainerStatus": {"progressPercentage": 140}}, token())
    assert code == 422 and "progressPercentage" in body["message"]  # the CRD schema's maximum: 100
    missing = PATH.replace("lesson-ddp", "gone")
    code, body = await post(missing, REPORT, token(name="gone"))
    assert (code, body["message"]) == (404, "Train job not found")
    code, body = await post(PATH.replace("/status", "/scale"), REPORT, token())
    assert (code, body["message"]) == (404, "Not found")
    code, body = await post(PATH, b"x" * (1 << 17), token())
    assert code == 413
    assert "trainerStatus" not in client.get("TrainJob", "default", "lesson-ddp").get("status", {})


async def test_a_failure_of_the_server_itself_is_answered_as_a_status(status_server, monkeypatch):
    """Every answer is a metav1.Status, a failure of its own too (a full disk under the store, a
    bug): never aiohttp's plain-text 500 page."""
    client, post, token = status_server

    def broken(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(client, "get", broken)
    code, body = await post(PATH, REPORT, token())
    assert (code, body["kind"], body["reason"]) == (500, "Status", "InternalError")
    assert body["message"] == "Internal error occurred: OSError: [Errno 28] No space left on device"
