"""A fake Kubernetes API server: a real HTTP/1.1 server on 127.0.0.1 that speaks the wire
protocol the `kubernetes` Python client uses, so the kube backend runs unmodified against it.

What it serves, as the real API server does:
- lists with a resourceVersion; label selectors (=, ==, !=, in, exists, !exists) and field selectors
  (metadata.name, metadata.namespace);
- watches: a chunked stream of JSON events from a resourceVersion, BOOKMARK events when the
  client allows them, 410 Gone for a version older than the last compaction (as an ERROR event,
  or as the HTTP status), the server-side timeout;
- create (409 AlreadyExists), get, JSON merge patch, delete (grace period recorded);
- pod logs, plain or followed (chunked, `timestamps=true`, `tailLines`, `sinceSeconds`), 400 while a
  container has not started;
- API discovery of a group/version, /version, and the Pipelines healthz path.

What tests can do to it: change objects (each change is an event with a new resourceVersion),
append to and close pod logs, drop every open stream mid-way, make open watches go silent,
compact history (so old versions are Gone), send bookmarks, and hook object creation (to play
kubelet or a controller). Every request is recorded.

Its parts: `served.py` (the collections, selectors, Status bodies), `store.py` (objects, versions,
history, logs), `faults.py` (what a test breaks, and the waits to break it on time), `handler.py`
(routing and the verbs), `streams.py` (watches and followed logs), `server.py` (FakeApiServer:
lifecycle, kubeconfig, requests), `objects.py` (pods, jobs and conditions tests put in).
"""

from tests.kube.fake_apiserver.objects import (
    condition,
    job_set,
    pod_metrics,
    pod_status,
    set_phase,
    train_job,
    worker_pod,
)
from tests.kube.fake_apiserver.served import JOBSETS, PODMETRICS, PODS, SERVED, TOKEN, TRAINJOBS, now_rfc3339
from tests.kube.fake_apiserver.server import FakeApiServer

__all__ = [
    "FakeApiServer", "JOBSETS", "PODMETRICS", "PODS", "SERVED", "TOKEN", "TRAINJOBS", "condition", "job_set",
    "now_rfc3339", "pod_metrics", "pod_status", "set_phase", "train_job", "worker_pod",
]
