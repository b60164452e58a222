"""pods/log for the embedded cluster: a pod's log file, as `kubectl logs` reads it (container,
previous, since, tail, limitBytes, timestamps, follow). Following reads the file from where it got
to, woken by the runners' log events, and ends when the pod's process has ended.
"""

from __future__ import annotations

import asyncio
import calendar
import time
from typing import TYPE_CHECKING, AsyncIterator

from backend.local import barepods
from backend.local.apiserver.wire import flag
from backend.local.registry.status import bad_request
from backend.local.podlogs import read_lines

if TYPE_CHECKING:
    from backend.local.api import ClusterApi


async def follow(api: "ClusterApi", namespace: str, name: str, options: dict[str, str]) -> AsyncIterator[bytes]:
    """The bytes of a pod's log as `kubectl logs` asks for them; with follow, until the pod ends."""
    pod = api.store.get(api.kinds["Pod"], namespace, name)
    container = options.get("container")
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    if container and container not in names:
        raise bad_request(f"container {container} is not valid for pod {name}")
    if flag(options.get("previous")):
        raise bad_request(f'previous terminated container "{container or names[0]}" in pod "{name}" not found')
    bare = api.ctl.bare_pods.get(f"{namespace}.{name}")
    job = (pod["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") or \
        (pod["metadata"].get("labels") or {}).get("ray.io/job-name", "")
    path = bare.log_path if bare is not None else api.ctl.layout.pod_log(job, name)
    if bare is not None:
        job = barepods.LOG_DIR
    timestamps = flag(options.get("timestamps"))
    follow = flag(options.get("follow"))
    since = _since(options)
    try:
        tail = int(options["tailLines"]) if "tailLines" in options else None
        limit = int(options["limitBytes"]) if "limitBytes" in options else None
    except ValueError:
        raise bad_request("tailLines and limitBytes must be integers") from None
    size = path.stat().st_size if path.exists() else 0
    lines = [(t, text) for t, text, _end in read_lines(path, 0, size) if since is None or t >= since]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    sent = 0
    chunk = _format(lines, timestamps)
    if limit is not None:
        chunk = chunk[:limit]
    sent += len(chunk)
    yield chunk
    if not follow:
        return
    offset = size
    wake = api.ctl.events.subscribe("logs", job)
    try:
        while True:
            done = not bare.running() if bare is not None else api.ctl.pod_finished(name)
            size = path.stat().st_size if path.exists() else offset
            if size > offset:
                data = _format([(t, x) for t, x, _e in read_lines(path, offset, size)], timestamps)
                offset = size
                if limit is not None:
                    data = data[:max(0, limit - sent)]
                sent += len(data)
                if data:
                    yield data
            if done or (limit is not None and sent >= limit):
                return
            try:
                await asyncio.wait_for(wake.queue.get(), 1.0)
            except asyncio.TimeoutError:
                pass
            while not wake.queue.empty():
                wake.queue.get_nowait()
    finally:
        api.ctl.events.unsubscribe(wake)


def _since(options: dict[str, str]) -> float | None:
    if "sinceSeconds" in options:
        try:
            return time.time() - int(options["sinceSeconds"])
        except ValueError:
            raise bad_request("sinceSeconds must be an integer") from None
    if "sinceTime" in options:
        try:
            return calendar.timegm(time.strptime(options["sinceTime"][:19], "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            raise bad_request("sinceTime must be an RFC 3339 time") from None
    return None


def _format(lines: list[tuple[float, str]], timestamps: bool) -> bytes:
    if timestamps:
        return "".join(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e9):09d}Z {text}\n"
                       for t, text in lines).encode()
    return "".join(f"{text}\n" for _t, text in lines).encode()
