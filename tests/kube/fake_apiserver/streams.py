"""The fake's two kinds of stream, each a chunked HTTP answer that waits on the store's Condition:
a watch (the events after a resourceVersion, BOOKMARKs when allowed, 410 Gone from a compacted
version, the server-side timeout) and a pod's log (plain, or followed until the container ends;
`timestamps=true`, `tailLines`, `sinceSeconds`; 400 while the container has not started). Both break mid-way when a test
drops the streams (faults.py), and a watch open before silence_watches() says nothing more.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import TYPE_CHECKING

from tests.kube.fake_apiserver.served import PODS, SERVED, api_version, matches, query_flag, status
from tests.kube.fake_apiserver.store import PodLog

if TYPE_CHECKING:
    from tests.kube.fake_apiserver.handler import Handler


def serve_watch(handler: "Handler", key: tuple[str, str], ns: str, query: dict[str, str]) -> None:
    api = handler.api
    bookmarks_allowed = query_flag(query, "allowWatchBookmarks")
    deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
    with api.cond:
        since = query.get("resourceVersion") or ""
        position = int(since) if since not in ("", "0") else api.rv
        gone = since not in ("", "0") and position < api.compacted
        if gone:
            expired = status(410, "Expired", f"too old resource version: {position} ({api.compacted})")
            if api.gone_as_http_status:
                handler.send_json(410, expired)
                return
        generation, bookmarks = api.generation, api.bookmarks
    handler.start_chunked("application/json")
    if gone:
        handler.chunk(json.dumps({"type": "ERROR", "object": expired}).encode() + b"\n")
        handler.end_chunks()
        return
    entry = (key, generation)
    with api.cond:
        api.streaming.append(entry)
        api.cond.notify_all()
    try:
        _stream_events(handler, key, ns, query, position, generation, bookmarks, bookmarks_allowed, deadline)
    finally:
        with api.cond:
            api.streaming.remove(entry)


def _stream_events(handler: "Handler", key: tuple[str, str], ns: str, query: dict[str, str], position: int,
                   generation: int, bookmarks: int, bookmarks_allowed: bool, deadline: float) -> None:
    api = handler.api
    silent = False
    while True:
        with api.cond:
            while True:
                if api.stopping:
                    return handler.break_connection()
                if not silent and api.generation != generation:
                    if generation < api.silenced:
                        silent = True  # open before silence_watches(): say nothing more, ever
                    else:
                        return handler.break_connection()
                if silent:
                    api.cond.wait()
                    continue
                pending = [(rv, kind, obj) for rv, k, kind, obj in api.history
                           if rv > position and k == key and matches(obj, ns, query)]
                bookmark = bookmarks_allowed and api.bookmarks != bookmarks
                remaining = deadline - time.monotonic()
                if pending or bookmark or remaining <= 0:
                    break
                api.cond.wait(remaining)
            position = api.rv
            bookmarks = api.bookmarks
        if not pending and not bookmark:
            handler.end_chunks()  # the server-side timeout: a clean end
            return
        data = b"".join(json.dumps({"type": kind, "object": obj}).encode() + b"\n" for _, kind, obj in pending)
        if bookmark:
            data += json.dumps({"type": "BOOKMARK", "object": {
                "kind": SERVED[key][0], "apiVersion": api_version(key),
                "metadata": {"resourceVersion": str(position)}}}).encode() + b"\n"
        try:
            handler.chunk(data)
        except OSError:
            return
        if bookmark:
            with api.cond:
                api.bookmarks_sent += 1
                api.cond.notify_all()


def serve_log(handler: "Handler", ns: str, name: str, query: dict[str, str]) -> None:
    api = handler.api
    follow = query_flag(query, "follow")
    stamps = query_flag(query, "timestamps")
    with api.cond:
        pod = api.objects[PODS].get((ns, name))
        if pod is None:
            handler.not_found(PODS, name)
            return
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        started = any((s.get("state") or {}).get("running") or (s.get("state") or {}).get("terminated")
                      for s in statuses)
        container = query.get("container", "node")
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if names and container not in names:
            handler.send_json(400, status(400, "BadRequest", f"container {container} is not valid for pod {name}"))
            return
        if not started:
            handler.send_json(400, status(400, "BadRequest", f'container "{container}" in pod "{name}" '
                                          "is waiting to start: ContainerCreating"))
            return
        log = api.logs.setdefault((ns, name), PodLog())
        generation = api.generation

    def render(lines: list[tuple[str, str]]) -> bytes:
        return b"".join(((f"{stamp} {text}" if stamps else text) + "\n").encode() for stamp, text in lines)

    with api.cond:
        sent = _first_line(log, query)
    if not follow:
        with api.cond:
            data = render(log.lines[sent:])
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        return
    handler.start_chunked("text/plain")
    while True:
        with api.cond:
            while (sent == len(log.lines) and not log.closed and api.generation == generation
                   and not api.stopping):
                api.cond.wait()
            if log.cut:
                handler.end_chunks()
                return
            fresh = log.lines[sent:]
            sent = len(log.lines)
            closed, broken = log.closed, api.generation != generation or api.stopping
        try:
            if fresh and not broken:
                handler.chunk(render(fresh))
            if broken:
                return handler.break_connection()
            if closed:
                handler.end_chunks()
                return
        except OSError:
            return


def _first_line(log: PodLog, query: dict[str, str]) -> int:
    """The index of the first line a request gets: those stamped within `sinceSeconds`, then the
    last `tailLines` of them (the kubelet applies them in that order)."""
    first = 0
    if "sinceSeconds" in query:
        since = time.time() - int(query["sinceSeconds"])
        first = next((i for i, (stamp, _) in enumerate(log.lines)
                      if datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() >= since), len(log.lines))
    if "tailLines" in query:
        first = max(first, len(log.lines) - int(query["tailLines"]))
    return first
