"""The log of one worker pod, read from its first line and followed, as batches of LogLines.

The API server streams a followed log until the container ends. If the stream breaks first (a
dropped connection, a silent one), the log is opened again from the start and the lines already
delivered are skipped by count: a container's log only grows, so the count is a cursor and no
line is lost or repeated. Each read of the stream becomes one batch, so a busy log arrives in
few, large batches.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from backend.kube.connection import CONNECT_TIMEOUT, Connection
from backend.kube.pods import has_started, log_container, parse_time, pod_from, trainer_status
from backend.kube.threads import Halt, cancel_all, iterate_in_thread, pump
from backend.models import TRAINER_CONTAINER, LogLine

# Seconds a followed log may stay silent before the stream is reopened (a training worker can
# legitimately print nothing for a while, e.g. waiting for its peers).
DEFAULT_LOG_READ_TIMEOUT = 300.0


def parse_line(pod: str, rank: int, raw: str) -> LogLine:
    """`<RFC3339 timestamp> <text>` (the API server's timestamps=true format) as a LogLine."""
    stamp, _, text = raw.partition(" ")
    when = parse_time(stamp)
    if when is None:  # not timestamped after all: keep the whole line
        when, text = time.time(), raw
    return LogLine.parsed(pod, rank, when, text)


class PodLog:
    """A producer (see threads.iterate_in_thread) of list[LogLine] for one pod."""

    def __init__(self, conn: Connection, pod: str, rank: int, follow: bool = True,
                 read_timeout: float = DEFAULT_LOG_READ_TIMEOUT, restart_count: int = 0,
                 container: str = TRAINER_CONTAINER) -> None:
        from kubernetes import client

        self.conn = conn
        self.core = client.CoreV1Api(conn.api)
        self.pod = pod
        self.rank = rank
        self.follow = follow
        self.container = container
        self.read_timeout = read_timeout
        self.delivered = 0
        # A container restarted in place (restartPolicy OnFailure) starts a new, empty log.
        self.restart_count = restart_count

    def __call__(self, emit: Callable[[list[LogLine]], None], halt: Halt) -> None:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        failures = 0
        while not halt.is_set():
            try:
                tail = self._read(emit, halt)
                if not self.follow or self._finished():
                    if tail:  # a last line without a newline, complete now that the log ended
                        self.delivered += 1
                        emit([parse_line(self.pod, self.rank, tail.decode(errors="replace"))])
                    return
                failures = 0  # the stream ended early while the container still runs: reopen
            except ApiException as exc:
                if exc.status == 404:
                    return  # the pod is gone, and its log with it
                if exc.status != 400:  # 400: the container is not running yet
                    raise self.conn.translate(exc, f"log of pod {self.pod}") from None
            except (HTTPError, OSError) as exc:
                if halt.is_set():
                    return
                if not self.follow:
                    raise self.conn.translate(exc, f"log of pod {self.pod}") from None
            failures += 1
            if failures > 1 and halt.wait(min(5.0, 0.1 * 2 ** failures)):
                return

    def _read(self, emit: Callable[[list[LogLine]], None], halt: Halt) -> bytes:
        """One request; emits the complete lines not delivered yet, returns an unfinished one."""
        response = self.core.read_namespaced_pod_log(
            self.pod, self.conn.namespace, container=self.container, follow=self.follow,
            timestamps=True, _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT, self.read_timeout if self.follow else 60.0),
        )
        seen = 0
        pending = b""
        with halt.track(response):
            for chunk in response.stream(amt=None, decode_content=False):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                batch = []
                for raw in complete:
                    seen += 1
                    if seen > self.delivered:
                        batch.append(parse_line(self.pod, self.rank, raw.decode(errors="replace")))
                if batch:
                    self.delivered = seen
                    emit(batch)
                if halt.is_set():
                    return b""
        return pending if seen + 1 > self.delivered else b""

    def _finished(self) -> bool:
        """After a followed stream ended: has the container ended (or the pod gone)?"""
        import json

        from kubernetes.client.exceptions import ApiException

        try:
            response = self.core.read_namespaced_pod(self.pod, self.conn.namespace, _preload_content=False,
                                                     _request_timeout=(CONNECT_TIMEOUT, 30.0))
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        raw = json.loads(response.data)
        status = trainer_status(raw)
        if int(status.get("restartCount") or 0) != self.restart_count:
            self.restart_count = int(status.get("restartCount") or 0)
            self.delivered = 0
            return False
        phase = (raw.get("status") or {}).get("phase")
        return bool((status.get("state") or {}).get("terminated")) or phase in ("Succeeded", "Failed")


class LogFollowers:
    """One PodLog thread per worker pod whose container has started, all feeding one queue as
    ("log", list[LogLine]) items, then ("log", Ended) per pod — like stern, a pod that appears
    later (a replacement after a group restart) is followed as soon as it starts."""

    def __init__(self, conn: Connection, queue: asyncio.Queue, read_timeout: float = DEFAULT_LOG_READ_TIMEOUT) -> None:
        self.conn = conn
        self.queue = queue
        self.read_timeout = read_timeout
        self.tasks: dict[str, asyncio.Task] = {}

    def start(self, raw_pod: dict, follow: bool = True) -> None:
        # Called on every pod event: the cheap checks come before the pod is parsed.
        if raw_pod["metadata"]["name"] in self.tasks or not has_started(raw_pod):
            return
        pod = pod_from(raw_pod)
        producer = PodLog(self.conn, pod.name, pod.rank, follow=follow, read_timeout=self.read_timeout,
                          restart_count=pod.restarts, container=log_container(raw_pod))
        self.tasks[pod.name] = pump(iterate_in_thread(producer, f"log-{pod.name}"), self.queue, "log")

    def following(self) -> list[str]:
        """The pods whose logs are still being read (they may print more)."""
        return [name for name, task in self.tasks.items() if not task.done()]

    def idle(self) -> bool:
        """Every log started so far has been read to its end."""
        return all(task.done() for task in self.tasks.values())

    async def close(self) -> None:
        await cancel_all(list(self.tasks.values()))
