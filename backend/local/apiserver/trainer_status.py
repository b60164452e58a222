"""The Trainer's status server (kubeflow/trainer v2.3.0 pkg/statusserver, the TrainJobStatus feature
gate on): where a training job's rank 0 reports its progress, on a port of its own as upstream's
runs beside the Trainer's webhooks, HTTPS with the state root's CA.

    POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs/NAME/status
    Authorization: Bearer <the pod's projected token>
    {"trainerStatus": {"progressPercentage": 40, "estimatedRemainingSeconds": 75, "metrics": [...],
                       "lastUpdatedTime": "..."}}

As server.go and auth.go answer it: a token that is not a service-account token for the
TrainJob's audience (TokenAudience) and namespace is 403 Forbidden; a body that does not parse is
422 "Invalid payload"; one without trainerStatus is 200 and changes nothing; otherwise the
TrainJob's status.trainerStatus is applied under the field manager `trainer-status` (its schema
validation's refusal 422, a missing TrainJob 404 "Train job not found") and the body echoed with
200. A body over 64 KiB is 413; any other path or verb 404 "Not found". Answers are metav1.Status,
a failure of its own too (answers.py).
"""

from __future__ import annotations

import json
import logging
import re
import ssl
import time
from pathlib import Path
from typing import Callable

from aiohttp import web

from backend.local.apiserver import credentials
from backend.local.apiserver.answers import http_refusal, status_errors
from backend.local.apiserver.listen import listen
from backend.local.registry.client import Client
from backend.local.registry.status import ApiError
from backend.local.registry.tokens import TokenIssuer, trainer_status_audience

log = logging.getLogger("kfcockpit.trainer-status")

MAX_BODY = 1 << 16  # server.go maxBodySize
FIELD_MANAGER = "trainer-status"
_PATH = re.compile(r"/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs/([^/]+)/status")


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason, "code": code}, status=code)


def _refusal(exc: web.HTTPException) -> ApiError:
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return ApiError(413, "RequestEntityTooLarge", "Payload too large")
    return http_refusal(exc)


class TrainerStatusServer:
    def __init__(self, client: Client, tokens: TokenIssuer, clock: Callable[[], float] = time.time):
        self.client, self.tokens, self.clock = client, tokens, clock
        self.app = web.Application(client_max_size=MAX_BODY, middlewares=[status_errors(log, _refusal)])
        self.app.router.add_route("*", "/{tail:.*}", self._route)
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _route(self, request: web.Request) -> web.StreamResponse:
        found = _PATH.fullmatch(request.path)
        if request.method != "POST" or found is None:
            return _status(404, "NotFound", "Not found")
        namespace, name = found.groups()
        if not self._authorized(request.headers.get("Authorization", ""), namespace, name):
            return _status(403, "Forbidden", "Forbidden")
        if (request.content_length or 0) > MAX_BODY:
            return _status(413, "RequestEntityTooLarge", "Payload too large")
        try:
            body = json.loads(await request.read())
        except (ValueError, web.HTTPRequestEntityTooLarge):
            return _status(422, "Invalid", "Invalid payload")
        if not isinstance(body, dict):
            return _status(422, "Invalid", "Invalid payload")
        trainer_status = body.get("trainerStatus")
        if trainer_status is None:
            return web.json_response(body)
        trainjob = self.client.get("TrainJob", namespace, name)
        if trainjob is None:
            return _status(404, "NotFound", "Train job not found")
        trainjob.setdefault("status", {})["trainerStatus"] = trainer_status
        try:
            self.client.update_status("TrainJob", trainjob)
        except ApiError as exc:
            if exc.code in (400, 422):
                return _status(422, "Invalid", exc.message)
            if exc.code == 404:
                return _status(404, "NotFound", "Train job not found")
            log.error("trainjob %s/%s: status not applied: %s", namespace, name, exc.message)
            return _status(500, "InternalError", "Internal error")
        return web.json_response(body)

    def _authorized(self, header: str, namespace: str, name: str) -> bool:
        """auth.go: `Bearer <token>`, verified for the TrainJob's audience, of its namespace."""
        parts = header.split()
        if len(parts) != 2 or parts[0].lower() != "bearer":
            return False
        claims = self.tokens.check(parts[1], trainer_status_audience(namespace, name), self.clock())
        return claims is not None and claims.subject.split(":")[2:3] == [namespace]

    async def start(self, port_file: Path, pki: credentials.Credentials) -> None:
        """HTTPS on loopback, on the port this state root had before when it is free."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        sock = listen(port_file)
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, ssl_context=context, shutdown_timeout=0.5).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
