"""TrainJob progress as Kubeflow Trainer v2.3 has it: rank 0 reports how far the run is.

With the `TrainJobStatus` feature gate on, the Trainer gives each trainer pod a status endpoint
(KEP-2779, proposals/2779-trainjob-progress; the controller's pkg/statusserver): its URL, the CA
that signs it and a projected service-account token, in

    KUBEFLOW_TRAINER_SERVER_URL      https://.../apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs/NAME/status
    KUBEFLOW_TRAINER_SERVER_CA_CERT  a path
    KUBEFLOW_TRAINER_SERVER_TOKEN    a path

and a POST of {"trainerStatus": {progressPercentage, estimatedRemainingSeconds, metrics,
lastUpdatedTime}} lands in the TrainJob's `status.trainerStatus` (kubectl get trainjob -o
jsonpath='{.status.trainerStatus}'). This makes the Kubeflow SDK's call (kubeflow.trainer's
`update_trainjob_status`: its body, clamping, token and CA handling, once per 5 s at most) with the
standard library: a worker may have torch alone, and the SDK's import (the kubernetes client)
would cost every restarted rank 0 a second of CPU. It runs on a thread of its own, never in a
step: a slow endpoint costs the run nothing, and a missing one is a no-op.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import urllib.request
from datetime import datetime, timezone

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
EVERY = 5.0  # seconds: the SDK's throttle (kubeflow.trainer's _MIN_UPDATE_INTERVAL_SECONDS)


def status_body(done: int, total: int, remaining: float | None, metrics: dict[str, object]) -> dict:
    """The request the SDK's update_trainjob_status sends (its field names and clamping)."""
    status: dict = {"lastUpdatedTime": datetime.now(timezone.utc).isoformat(),
                    "progressPercentage": max(0, min(100, int(100 * done / total) if total else 0))}
    if remaining is not None:
        status["estimatedRemainingSeconds"] = max(0, int(remaining))
    if metrics:
        status["metrics"] = [{"name": str(k), "value": str(v)} for k, v in metrics.items()]
    return {"trainerStatus": status}


def post(url: str, ca_file: str | None, token_path: str, body: dict) -> bool:
    """The SDK's call with the standard library: True on 200. The endpoint is HTTPS (the
    Trainer's status server serves TLS only): any other scheme is not sent."""
    if not url.startswith("https://"):
        return False
    try:
        with open(token_path) as f:
            token = f.read().strip()
        context = ssl.create_default_context(cafile=ca_file if ca_file and os.path.exists(ca_file) else None)
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={  # noqa: S310
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})  # https only, checked above
        with urllib.request.urlopen(request, context=context, timeout=5) as response:  # noqa: S310
            return response.status == 200
    except (OSError, ValueError):
        return False


class ProgressReporter:
    """Takes the newest progress from the loop (cheap: a lock and a dict) and sends it at most
    every EVERY seconds from its own thread; `close` sends the last one."""

    def __init__(self, total_steps: int, environ: dict[str, str] | None = None):
        env = os.environ if environ is None else environ
        self.url, self.ca, self.token = env.get(ENV_URL), env.get(ENV_CA), env.get(ENV_TOKEN)
        self.total = total_steps
        self.sent = 0
        self._newest: tuple[int, float | None, dict] | None = None
        self._wake = threading.Condition()
        self._closing = False
        self._thread = None
        if self.url and self.token:
            self._thread = threading.Thread(target=self._send_loop, name="progress", daemon=True)
            self._thread.start()

    def update(self, done: int, step_seconds: float | None, metrics: dict[str, object]) -> None:
        if self._thread is None:
            return
        remaining = None if step_seconds is None else (self.total - done) * step_seconds
        with self._wake:
            self._newest = (done, remaining, metrics)

    def close(self, timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout)

    def _send(self, newest: tuple[int, float | None, dict]) -> None:
        done, remaining, metrics = newest
        if post(self.url, self.ca, self.token, status_body(done, self.total, remaining, metrics)):
            self.sent += 1

    def _send_loop(self) -> None:
        while True:
            with self._wake:
                newest, self._newest = self._newest, None
                closing = self._closing
            if newest is not None:
                self._send(newest)
            if closing:
                return
            with self._wake:
                self._wake.wait_for(lambda: self._closing, timeout=EVERY)
