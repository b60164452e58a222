"""The API server's long-lived responses: watches (backlog from a resourceVersion, the
initial-events-end bookmark, periodic bookmarks, Table rows, batched events until the timeout)
and pods/log follows, which the pod's node serves (`Nodes`, as kube-apiserver proxies a pod's
log to its kubelet). Each open one counts in `open_streams`, which `streams_changed` hears: a
client watching keeps the embedded cluster up. Each registers with `faults` (faults.py), which a
test may use to break it; in normal use nothing does.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator, Callable, Protocol

from aiohttp import web

from backend.local.apiserver import freshness, options, tables
from backend.local.apiserver.faults import BOOKMARK_NOW, Faults
from backend.local.registry.status import ApiError
from backend.local.registry.store import Store
from backend.local.apiserver.wire import Target, matcher, resource_name, wants_table
from backend.local.registry.kinds import Kind

BOOKMARK_SECONDS = 5.0


class Nodes(Protocol):
    """What the API server asks of the nodes (their kubelets): a pod's log, and metrics.k8s.io's
    readings (the kubelet's resource metrics, as metrics-server reads them)."""

    def pod_log(self, pod: dict[str, Any], options: dict[str, str]) -> AsyncIterator[bytes]: ...

    def metrics(self, kind: Kind, namespace: str | None) -> list[dict[str, Any]]: ...


class Streams:
    """ApiServer's watch and log streams (a part of it): they use its store and nodes."""

    store: Store
    nodes: Nodes
    faults: Faults
    fresh_timeout: float
    open_streams: int
    streams_changed: Callable[[int], None]

    async def _watch(self, request: web.Request, target: Target,
                     listing: options.ListOptions) -> web.StreamResponse:
        """A watch as the watch cache serves it (storage/cacher/cacher.go Watch): from a version
        it has not reached yet it first waits (freshness.py); one it no longer holds, or one it
        did not reach in time, is the stream's one ERROR event (newErrWatcher)."""
        query = request.query
        match = matcher(request, target.kind)
        since = options.check_resource_version(listing.resource_version, resource_name(target.kind))
        initial = bool(listing.send_initial_events)
        failure: ApiError | None = None
        watch, backlog = None, []
        try:
            if since is not None and since > self.store.rv and not initial:
                await freshness.until_fresh(self.store, since, self.fresh_timeout)
            watch, backlog = self.store.watch(target.kind, target.namespace, match,
                                              "0" if initial else listing.resource_version)
        except ApiError as exc:
            failure = exc
            if exc.code == 410 and self.faults.gone_as_http_status:
                raise
        timeout = 1800 if not listing.timeout else max(0, listing.timeout)
        bookmarks = listing.bookmarks
        as_table = wants_table(request)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        first_table = True

        def encode(event_type: str, obj: dict[str, Any]) -> bytes:
            nonlocal first_table
            if as_table and event_type not in ("BOOKMARK", "ERROR"):
                obj = tables.table(target.kind, [obj], obj["metadata"].get("resourceVersion", ""),
                                   query.get("includeObject", "Metadata"), headers=first_table)
                first_table = False
            return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"

        def bookmark(extra: dict[str, str] | None = None) -> bytes:
            meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
            if extra:
                meta["annotations"] = extra
            return encode("BOOKMARK", {"kind": target.kind.kind, "apiVersion": target.kind.api_version,
                                       "metadata": meta})

        if watch is None:
            await response.write(encode("ERROR", failure.status() if failure else {}))
            return response
        deadline = time.monotonic() + timeout
        self._stream(+1)
        fault = self.faults.opened(target.kind.kind, "", request.transport, watch.queue if bookmarks else None,
                                   watch.close)

        async def send(data: bytes) -> None:
            if data and not fault.silent:
                await response.write(data)

        try:
            chunk = b"".join(encode(e.type, e.object) for e in backlog)
            if initial:
                chunk += bookmark({"k8s.io/initial-events-end": "true"})
            await send(chunk)
            while not watch.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    event = await asyncio.wait_for(watch.queue.get(), min(left, BOOKMARK_SECONDS))
                except asyncio.TimeoutError:
                    if bookmarks:
                        await send(bookmark())
                    continue
                if event is None:
                    break
                events = [event]
                while not watch.queue.empty() and len(events) < 1000:
                    queued = watch.queue.get_nowait()
                    if queued is None:
                        watch.closed = True
                        break
                    events.append(queued)
                await send(b"".join(bookmark() if e is BOOKMARK_NOW else encode(e.type, e.object) for e in events))
                if BOOKMARK_NOW in events and not fault.silent:
                    self.faults.bookmarked()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.faults.closed(fault)
            self.store.unwatch(watch)
            self._stream(-1)
        return response

    async def _log(self, request: web.Request, target: Target) -> web.StreamResponse:
        if request.method != "GET" or target.name is None:
            raise ApiError(405, "MethodNotAllowed", "pods/log supports GET only")
        pod = self.store.get(target.kind, target.namespace, target.name)
        options = dict(request.query)
        lines = self.nodes.pod_log(pod, options)
        first = await anext(lines, None)  # errors (unknown container, no previous) before any byte is sent
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        self._stream(+1)
        fault = self.faults.opened("log", f"{target.namespace}/{target.name}", request.transport)
        try:
            if first:
                await response.write(first)
            async for chunk in lines:
                if fault.ending:
                    break
                await response.write(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.faults.closed(fault)
            await lines.aclose()
            self._stream(-1)
        return response

    def _stream(self, change: int) -> None:
        self.open_streams += change
        self.streams_changed(self.open_streams)
