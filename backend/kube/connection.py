"""A connection to one Kubernetes API server from a kubeconfig context, and the translation of
everything that can go wrong on the wire into one-line ClusterErrors.

Loading the kubeconfig is local and quick (no network), so `Connection.open` can run inside the
synchronous `connect()`; the first API call is what finds out whether the server answers.
"""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from backend.cluster import ClusterError, InvalidResource, NotFound, Unavailable
from backend.errors import one_line
from backend.settings import Settings

# Seconds to wait for a TCP connection, and for the answer to a single (non-streaming) call.
CONNECT_TIMEOUT = 5.0
CALL_TIMEOUT = 30.0
CREATE_CLUSTER = "kind create cluster --config manifests/kind/cluster.yaml"


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _pod_namespace() -> str:
    """Inside a pod: the namespace of its service account."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def kubeconfig_paths(settings: Settings) -> str:
    """--kubeconfig, else $KUBECONFIG (may list several files), else ~/.kube/config."""
    if settings.kubeconfig:
        return str(Path(settings.kubeconfig).expanduser())
    env = os.environ.get("KUBECONFIG", "")
    if env.strip(os.pathsep):
        return env
    return str(Path("~/.kube/config").expanduser())


@dataclass
class Connection:
    """The API client of one context plus where it points, for messages."""

    api: Any  # kubernetes.client.ApiClient
    namespace: str
    context: str
    server: str
    executor: ThreadPoolExecutor
    # A cluster this process can start again (the embedded one): starts it and returns the
    # address to use now. None for any other cluster, whose API server is not ours to start.
    revive: Callable[[], str] | None = None

    @classmethod
    def open(cls, settings: Settings) -> "Connection":
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        configuration = client.Configuration()
        paths = kubeconfig_paths(settings)
        existing = [p for p in paths.split(os.pathsep) if p and Path(p).expanduser().is_file()]
        if not existing:
            if os.environ.get("KUBERNETES_SERVICE_HOST") and not settings.context and not settings.kubeconfig:
                # Inside a pod (a pipeline component): the service account's in-cluster config.
                config.load_incluster_config(client_configuration=configuration)
                return cls._with(configuration, settings.namespace or _pod_namespace(), "in-cluster")
            raise Unavailable(
                f"no kubeconfig at {paths}: create a cluster ({CREATE_CLUSTER}) "
                "or pass --kubeconfig FILE"
            )
        merged = os.pathsep.join(existing)
        try:
            contexts, current = config.list_kube_config_contexts(merged)
        except (ConfigException, OSError, ValueError) as exc:
            raise Unavailable(f"kubeconfig {merged} is not usable: {one_line(str(exc))}") from None
        names = [c.get("name") for c in contexts or []]
        context = settings.context or (current or {}).get("name")
        if not context:
            raise Unavailable(f"kubeconfig {merged} has no current context: pass --context "
                              f"(available: {', '.join(names) or 'none'})")
        if context not in names:
            raise Unavailable(f"context {context!r} is not in kubeconfig {merged} "
                              f"(available: {', '.join(names) or 'none'})")
        try:
            config.load_kube_config(config_file=merged, context=context,
                                    client_configuration=configuration, persist_config=False)
        except (ConfigException, OSError, ValueError) as exc:
            raise Unavailable(f"context {context!r} in {merged} is not usable: {one_line(str(exc))}") from None
        own = next((c.get("context") or {} for c in contexts if c.get("name") == context), {})
        return cls._with(configuration, settings.namespace or own.get("namespace") or "default", context)

    @classmethod
    def _with(cls, configuration: Any, namespace: str, context: str) -> "Connection":
        from kubernetes import client

        # One connection per concurrent stream (pod watch, job watch, a log per worker...).
        configuration.connection_pool_maxsize = 32
        return cls(
            api=client.ApiClient(configuration),
            namespace=namespace,
            context=context,
            server=configuration.host,
            executor=ThreadPoolExecutor(max_workers=8, thread_name_prefix="kube-call"),
        )

    # ------------------------------------------------------------------ calls

    async def call(self, fn: Callable[..., Any], *args: Any, what: str = "", **kwargs: Any) -> Any:
        """A blocking client call in a worker thread; errors become one-line ClusterErrors."""
        kwargs.setdefault("_request_timeout", (CONNECT_TIMEOUT, CALL_TIMEOUT))
        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            try:
                return await loop.run_in_executor(self.executor, lambda: fn(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - translated below, or re-raised
                if attempt == 1 and await asyncio.to_thread(self.reconnect, exc):
                    continue
                raise self.translate(exc, what) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def reconnect(self, exc: BaseException) -> bool:
        """After `exc`: True when the API server was lost, this cluster could be started again
        and now answers at `self.server` (worth one more try). Blocking; Unavailable when the
        cluster was stopped on purpose."""
        from urllib3.exceptions import HTTPError

        if self.revive is None or not isinstance(exc, (HTTPError, OSError)):
            return False
        self.server = self.api.configuration.host = self.revive()
        return True

    async def call_json(self, fn: Callable[..., Any], *args: Any, what: str = "", **kwargs: Any) -> Any:
        """Like `call`, but the response body as plain JSON (no model deserialisation)."""
        response = await self.call(fn, *args, what=what, _preload_content=False, **kwargs)
        return json.loads(response.data or b"null")

    def translate(self, exc: BaseException, what: str = "") -> BaseException:
        """The ClusterError a user can act on for a client or transport exception."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        if isinstance(exc, ClusterError):
            return exc
        subject = f"{what}: " if what else ""
        if isinstance(exc, ApiException):
            status = exc.status or 0
            message = api_message(exc)
            if status == 404:
                details = _status(exc).get("details") or {}
                if details.get("kind") == "namespaces":
                    return NotFound(f"namespace {details.get('name')!r} does not exist "
                                    f"(kubectl create namespace {details.get('name')})")
                if not details.get("name"):
                    return MissingType(f"{subject}the API server has no such resource type")
                return NotFound(f"{subject}not found in namespace {self.namespace}")
            if status == 409 and _status(exc).get("reason") == "AlreadyExists":
                return AlreadyExists(f"{subject}already exists")
            if status in (400, 409, 422):
                return InvalidResource(f"{subject}{message}")
            if status == 401:
                return ClusterError(f"{subject}the API server at {self.server} refused the credentials "
                                    f"of context {self.context!r} (401 Unauthorized)")
            if status == 403 and message.startswith("admission webhook"):
                # A validating webhook said no (e.g. the Trainer's): the manifest is at fault, not RBAC.
                return InvalidResource(f"{subject}{message}")
            if status == 403:
                return ClusterError(f"{subject}forbidden for context {self.context!r}: {message}")
            if status == 0 or status >= 500:
                return Unavailable(f"{subject}the API server at {self.server} failed: "
                                   f"{message or exc.reason}")
            return ClusterError(f"{subject}{status} {message or exc.reason}")
        if isinstance(exc, (HTTPError, OSError)):
            return self.unreachable(exc)
        return exc

    def unreachable(self, exc: BaseException) -> Unavailable:
        return Unavailable(f"the Kubernetes API server at {self.server} (context {self.context}) "
                           f"does not answer: {_transport_reason(exc)}")

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        try:
            self.api.close()
        except Exception:  # noqa: BLE001 - closing a pool that never opened
            pass


class MissingType(NotFound):
    """The API server does not serve this kind at all (its CRD is not installed)."""


class AlreadyExists(InvalidResource):
    pass


def _status(exc: Any) -> dict:
    """The Status object in an ApiException's body ({} when the body is not one)."""
    try:
        status = json.loads(getattr(exc, "body", None) or b"")
    except (ValueError, TypeError):
        return {}
    return status if isinstance(status, dict) else {}


def api_message(exc: Any) -> str:
    """The `message` of the Status object the API server returned, on one line."""
    message = _status(exc).get("message")
    if not message:
        body = getattr(exc, "body", None)
        message = body.decode(errors="replace") if isinstance(body, bytes) else body
    return one_line(str(message or getattr(exc, "reason", "") or exc))


def _transport_reason(exc: BaseException) -> str:
    """'connection refused' rather than urllib3's nested repr."""
    seen = exc
    for _ in range(5):
        inner = getattr(seen, "reason", None) or seen.__cause__ or seen.__context__
        if inner is None or inner is seen or isinstance(inner, str):
            break
        seen = inner
    text = str(seen)
    for marker, plain in (("Connection refused", "connection refused"),
                          ("timed out", "timed out"),
                          ("Name or service not known", "unknown host"),
                          ("nodename nor servname", "unknown host"),
                          ("CERTIFICATE_VERIFY_FAILED", "TLS certificate not trusted")):
        if marker in text:
            return plain
    return one_line(text) or type(seen).__name__
