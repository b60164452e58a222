"""Bound service-account tokens, as the API server's TokenRequest issues them for a projected
volume's `serviceAccountToken` source: for one audience, until an expiry, naming the pod's
service account. Upstream signs a JWT with the service-account key; here the state root keeps a
random key and a token is `<payload>.<HMAC-SHA256 of it>`, payload the claims as base64url JSON.
The holder of the key (the control plane) mints and checks them; a pod only reads its file.

Who checks: the Trainer's status server (apiserver/trainer_status.py) takes a TrainJob's
progress only with a token for that TrainJob's audience (statusserver.TokenAudience).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from training.atomic import write_atomic


@dataclass(frozen=True)
class Claims:
    audience: str
    expires: float
    subject: str  # system:serviceaccount:<namespace>:<name>


class TokenIssuer:
    def __init__(self, key: bytes):
        self._key = key

    @classmethod
    def load_or_create(cls, path: Path) -> "TokenIssuer":
        """The state root's key, made once (0600) so tokens outlive a controller restart."""
        try:
            return cls(path.read_bytes())
        except OSError:
            key = secrets.token_bytes(32)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, key)
            os.chmod(path, 0o600)
            return cls(key)

    def mint(self, audience: str, seconds: int, subject: str, now: float) -> str:
        claims = {"aud": audience, "exp": int(now + seconds), "sub": subject}
        payload = base64.urlsafe_b64encode(json.dumps(claims, sort_keys=True).encode()).decode().rstrip("=")
        return f"{payload}.{self._sign(payload)}"

    def check(self, token: str, audience: str, now: float) -> Claims | None:
        """The token's claims when it is ours, unexpired and for `audience`; else None."""
        payload, _, signature = token.strip().partition(".")
        if not payload or not hmac.compare_digest(signature.encode(), self._sign(payload).encode()):
            return None
        try:
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            found = Claims(str(claims["aud"]), float(claims["exp"]), str(claims["sub"]))
        except (ValueError, KeyError, TypeError):
            return None
        return found if found.audience == audience and found.expires > now else None

    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()


# The audience and path of the Trainer's status server (kubeflow/trainer v2.3.0
# pkg/statusserver/utils.go TokenAudience and StatusUrl): the TrainJobStatus plugin asks for
# tokens with this audience (controllers/trainjob_status.py), the server checks them
# (apiserver/trainer_status.py).
def trainer_status_path(namespace: str, name: str) -> str:
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def trainer_status_audience(namespace: str, name: str) -> str:
    return f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"
