"""The log of one worker pod, read from its first line (or its last few) and followed, as batches of
LogLines.

The API server streams a followed log until the container ends. If the stream breaks first (a
dropped connection, a silent one), the log is opened again where it was left and the lines already
delivered are skipped: a container's log only grows and its lines are stamped in order, so the
newest stamp delivered, and how many lines bore it, are a cursor, and no line is lost or repeated.
Each read of the stream becomes one batch, so a busy log arrives in few, large batches.

A pod followed only once a person looks at it (`LogFocus`) is read from its last `tail` lines; the
followers keep each pod's cursor from the lines they passed on, so a pod followed again later
skips what was already shown.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from backend.kube.connection import CONNECT_TIMEOUT, Connection
from backend.kube.pods import has_started, log_container, parse_time, pod_from, trainer_status
from backend.kube.threads import Halt, cancel_all, iterate_in_thread, pump
from backend.models import TRAINER_CONTAINER, LogLine

# Seconds a followed log may stay silent before the stream is reopened (a training worker can
# legitimately print nothing for a while, e.g. waiting for its peers).
DEFAULT_LOG_READ_TIMEOUT = 300.0
# A log reopened after its newest line asks for the lines since then (sinceSeconds: the client has
# no sinceTime), and this much before: the client's clock may lag the node's.
SINCE_SLACK = 120


@dataclass
class Cursor:
    """How far a pod's log was read: its newest line's stamp, and how many lines bore that stamp
    (a runtime stamps a burst of lines with one time)."""

    stamp: float | None = None
    count: int = 0
    # False when the lines of the newest stamp were read from the log's last lines (a tail), which
    # may begin in the middle of that stamp's burst: `count` then says nothing of its first ones.
    exact: bool = True

    def passed(self, when: float, exact: bool = True) -> None:
        if self.stamp is None or when > self.stamp:
            self.stamp, self.count, self.exact = when, 1, exact
        elif when == self.stamp:
            self.count += 1


def parse_line(pod: str, rank: int, raw: str) -> tuple[LogLine, bool]:
    """`<RFC3339 timestamp> <text>` (the API server's timestamps=true format) as a LogLine, and
    whether it was stamped (one that was not is timed now, and cannot move a cursor)."""
    stamp, _, text = raw.partition(" ")
    when = parse_time(stamp)
    if when is None:  # not timestamped after all: keep the whole line
        return LogLine.parsed(pod, rank, time.time(), raw), False
    return LogLine.parsed(pod, rank, when, text), True


class PodLog:
    """A producer (see threads.iterate_in_thread) of list[LogLine] for one pod: from its first line,
    or from its last `tail` lines; past `cursor` only (what was delivered before)."""

    def __init__(self, conn: Connection, pod: str, rank: int, follow: bool = True,
                 read_timeout: float = DEFAULT_LOG_READ_TIMEOUT, restart_count: int = 0,
                 container: str = TRAINER_CONTAINER, tail: int | None = None,
                 cursor: Cursor | None = None, previous: bool = False) -> None:
        from kubernetes import client

        self.conn = conn
        self.core = client.CoreV1Api(conn.api)
        self.pod = pod
        self.rank = rank
        self.follow = follow
        self.container = container
        self.read_timeout = read_timeout
        self.previous = previous  # the container's run before its restart in place (never followed)
        self.tail = tail  # the next open reads only the last `tail` lines (then: since the cursor)
        self.cursor = Cursor(cursor.stamp, cursor.count, cursor.exact) if cursor is not None else Cursor()
        # A container restarted in place (restartPolicy OnFailure) starts a new, empty log.
        self.restart_count = restart_count

    def __call__(self, emit: Callable[[list[LogLine]], None], halt: Halt) -> None:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        failures = 0
        while not halt.is_set():
            try:
                tail = self._read(emit, halt)
                if self.follow and self._finished():
                    # The stream may have ended before the container's last lines (a server that
                    # ends a follow early, a reopen between them): read what is left, once.
                    self.follow = False
                    tail = self._read(emit, halt)
                if not self.follow:
                    if tail is not None:  # a last line without a newline, complete now that the log ended
                        emit([tail])
                    return
                failures = 0  # the stream ended early while the container still runs: reopen
            except ApiException as exc:
                if exc.status == 404:
                    return  # the pod is gone, and its log with it
                if exc.status != 400 or self.previous:  # 400: the container is not running yet
                    raise self.conn.translate(exc, f"log of pod {self.pod}") from None
            except (HTTPError, OSError) as exc:
                if halt.is_set():
                    return
                if not self.follow:
                    raise self.conn.translate(exc, f"log of pod {self.pod}") from None
            failures += 1
            if failures > 1 and halt.wait(min(5.0, 0.1 * 2 ** failures)):
                return

    def _where(self) -> dict:
        """Where the next request starts: the last `tail` lines, the cursor's second (a little
        before), or the first line."""
        if self.previous:
            return {"previous": True}
        if self.tail is not None:
            return {"tail_lines": self.tail}
        if self.cursor.stamp is not None:
            return {"since_seconds": max(1, math.ceil(time.time() - self.cursor.stamp)) + SINCE_SLACK}
        return {}

    def _read(self, emit: Callable[[list[LogLine]], None], halt: Halt) -> LogLine | None:
        """One request; emits the complete lines past the cursor, returns an unfinished last one."""
        where = self._where()
        tailed: list[float] = [] if "tail_lines" in where else [float("nan")]  # the tail's first stamp
        response = self.core.read_namespaced_pod_log(
            self.pod, self.conn.namespace, container=self.container, follow=self.follow,
            timestamps=True, _preload_content=False, **where,
            _request_timeout=(CONNECT_TIMEOUT, self.read_timeout if self.follow else 60.0),
        )
        self.tail = None  # read from here on: a reopen continues from the cursor
        start = Cursor(self.cursor.stamp, self.cursor.count, self.cursor.exact)
        same = 0  # lines stamped as the cursor's newest, seen in this read

        def fresh(line: LogLine, stamped: bool) -> bool:
            nonlocal same
            if not stamped or start.stamp is None or line.time > start.stamp:
                return True
            if line.time < start.stamp or not start.exact:  # after a tail: that stamp's lines were all read
                return False
            same += 1
            return same > start.count

        pending = b""
        with halt.track(response):
            for chunk in response.stream(amt=None, decode_content=False):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                batch = []
                for raw in complete:
                    line, stamped = parse_line(self.pod, self.rank, raw.decode(errors="replace"))
                    if fresh(line, stamped):
                        if stamped:
                            if not tailed:
                                tailed.append(line.time)
                            self.cursor.passed(line.time, exact=line.time != tailed[0])
                        batch.append(line)
                if batch:
                    emit(batch)
                if halt.is_set():
                    return None
        if not pending:
            return None
        line, stamped = parse_line(self.pod, self.rank, pending.decode(errors="replace"))
        return line if fresh(line, stamped) else None

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
            self.cursor, self.tail = Cursor(), None  # the new container's log, from its first line
            return False
        phase = (raw.get("status") or {}).get("phase")
        return bool((status.get("state") or {}).get("terminated")) or phase in ("Succeeded", "Failed")


class LogFollowers:
    """A PodLog thread per followed pod whose container has started, all feeding one queue as
    ("log", list[LogLine]) items, then ("log", Ended) per pod. Like stern, a pod that appears
    later (a replacement after a group restart) is followed as soon as it starts; a pod can be
    let go (`stop`) and followed again, from its last lines, past what it delivered before."""

    def __init__(self, conn: Connection, queue: asyncio.Queue, read_timeout: float = DEFAULT_LOG_READ_TIMEOUT) -> None:
        self.conn = conn
        self.queue = queue
        self.read_timeout = read_timeout
        self.tasks: dict[str, asyncio.Task] = {}
        self.cursors: dict[str, Cursor] = {}  # per pod: how far its lines reached the queue

    def start(self, raw_pod: dict, follow: bool = True, tail: int | None = None) -> None:
        # Called on every pod event: the cheap checks come before the pod is parsed.
        name = raw_pod["metadata"]["name"]
        if name in self.tasks or not has_started(raw_pod):
            return
        pod = pod_from(raw_pod)
        cursor = self.cursors.setdefault(name, Cursor())
        producer = PodLog(self.conn, pod.name, pod.ranks[0], follow=follow, read_timeout=self.read_timeout,
                          restart_count=pod.restarts, container=log_container(raw_pod), tail=tail, cursor=cursor)
        self.tasks[name] = pump(_passed(iterate_in_thread(producer, f"log-{name}"), cursor), self.queue, "log")

    async def stop(self, name: str) -> None:
        """Stop reading a pod's log (its thread and connection go); `start` again resumes it."""
        task = self.tasks.pop(name, None)
        if task is not None:
            await cancel_all([task])

    def following(self) -> list[str]:
        """The pods whose logs are still being read (they may print more)."""
        return [name for name, task in self.tasks.items() if not task.done()]

    def idle(self) -> bool:
        """Every log started so far has been read to its end."""
        return all(task.done() for task in self.tasks.values())

    async def close(self) -> None:
        await cancel_all(list(self.tasks.values()))


async def _passed(batches: AsyncIterator[list[LogLine]], cursor: Cursor) -> AsyncIterator[list[LogLine]]:
    """The batches, moving `cursor` past each as it is handed on (on the loop: a thread stopped
    mid-read has read lines nobody received, and they must be read again)."""
    try:
        async for batch in batches:
            for line in batch:
                cursor.passed(line.time)
            yield batch
    finally:
        await batches.aclose()
