"""The Trainer's TrainJobStatus runtime plugin (kubeflow/trainer v2.3.0
pkg/runtime/framework/plugins/trainjobstatus), with its feature gate on: every trainer container
learns where to report progress, and with what.

- EnforceMLPolicy: the trainer containers get KUBEFLOW_TRAINER_SERVER_URL (the status server's
  address and `statusserver.StatusUrl(namespace, name)`), KUBEFLOW_TRAINER_SERVER_CA_CERT and
  KUBEFLOW_TRAINER_SERVER_TOKEN (files under /var/run/secrets/kubeflow/trainer), from the
  projected volume `kubeflow-trainer-token`: a service-account token for the audience
  `statusserver.TokenAudience(namespace, name)` (3600 s) and the CA from the ConfigMap below.
- Build: the ConfigMap `<trainjob>-tls-config` holding the CA (`ca.crt`) that signs the status
  server, owned by the TrainJob.

The status server itself is apiserver/trainer_status.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.local.controllers.apply import upsert
from backend.local.registry.strategy import Obj
from backend.local.registry.tokens import trainer_status_audience, trainer_status_path

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
VOLUME = "kubeflow-trainer-token"
TOKEN_FILE, CA_FILE = "token", "ca.crt"
TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class StatusServer:
    """Where the status server listens (`https://host:port`) and the CA (PEM) that signs it."""

    address: str
    ca_cert: str


def config_map_name(trainjob: Obj) -> str:
    return f"{trainjob['metadata']['name']}-tls-config"


def enforce(pod_spec: Obj, containers: list[Obj], trainjob: Obj, server: StatusServer) -> None:
    """The env, mount and volume, upserted by name (apply.py)."""
    meta = trainjob["metadata"]
    env = [{"name": ENV_URL, "value": server.address + trainer_status_path(meta["namespace"], meta["name"])},
           {"name": ENV_CA, "value": f"{MOUNT_PATH}/{CA_FILE}"},
           {"name": ENV_TOKEN, "value": f"{MOUNT_PATH}/{TOKEN_FILE}"}]
    for container in containers:
        container["env"] = upsert(container.get("env") or [], env)
        container["volumeMounts"] = upsert(container.get("volumeMounts") or [],
                                            [{"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}])
    volume = {"name": VOLUME, "projected": {"sources": [
        {"serviceAccountToken": {"audience": trainer_status_audience(meta["namespace"], meta["name"]),
                                 "expirationSeconds": TOKEN_SECONDS, "path": TOKEN_FILE}},
        {"configMap": {"name": config_map_name(trainjob), "items": [{"key": CA_FILE, "path": CA_FILE}]}}]}}
    pod_spec["volumes"] = upsert(pod_spec.get("volumes") or [], [volume])


def ca_config_map(trainjob: Obj, server: StatusServer) -> Obj:
    meta = trainjob["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": config_map_name(trainjob), "namespace": meta["namespace"],
                         "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                              "name": meta["name"], "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "data": {CA_FILE: server.ca_cert}}
