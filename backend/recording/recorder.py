"""Recording a job from any Cluster: what the cockpit watches of it (the job, its pods, the
nodes, the Events, its merged logs) as each item comes, and what it reads again and again (the
pods' usage every `sample_seconds`, the checkpoints and metrics of its volumes every few samples); at the end, what
`kfcockpit goodput` reads after the fact (the run records), so a replay measures what the live job
measured. Until the job ends (its summary finished and its logs closed) or `stop` is set.

Bounded: at most `lines_per_rank` log lines of each rank and `events` Events are kept; what went
over is counted in the footer and the summary, never silently cut.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from backend.errors import USER_ERRORS, one_line
from backend.models import JobSummary, LogLine
from backend.recording.format import Writer, args_key

LINES_PER_RANK = 20_000
EVENTS = 2_000
SAMPLE_SECONDS = 2.0
VOLUME_EVERY = 5  # samples: a volume's read starts a reader pod on Kubernetes (as the cockpit's storage says)
AFTER_THE_END = 5.0  # seconds the logs may take to close once the job has ended


@dataclass(frozen=True)
class Recorded:
    path: Path
    job: str
    seconds: float
    entries: int
    how: str
    dropped: dict[str, int]

    def one_line(self) -> str:
        size = self.path.stat().st_size if self.path.exists() else 0
        line = (f"recorded {self.job}: {self.seconds:.1f}s, {self.entries} entries, {size / 1024:.0f} KiB "
                f"in {self.path} ({self.how})")
        if self.dropped:
            line += "; dropped " + ", ".join(f"{count} {what}" for what, count in sorted(self.dropped.items()))
        return line


async def newest_job(cluster) -> str | None:
    """The job `record` takes without a name: the newest unfinished one, else the newest."""
    jobs = sorted(await cluster.list_jobs(), key=lambda j: j.created, reverse=True)
    best = next((j for j in jobs if not j.phase.finished), jobs[0] if jobs else None)
    return best.name if best else None


class Recorder:
    def __init__(self, cluster, job: str, path: Path, clock: Callable[[], float] = time.time,
                 lines_per_rank: int = LINES_PER_RANK, events: int = EVENTS,
                 sample_seconds: float = SAMPLE_SECONDS) -> None:
        self.cluster = cluster
        self.job = job
        self.path = path
        self.clock = clock
        self.lines_per_rank = lines_per_rank
        self.events = events
        self.sample_seconds = sample_seconds
        self.entries = 0
        self._lines: Counter[int] = Counter()
        self._events = 0
        self._dropped: Counter[str] = Counter()
        self._summary: JobSummary | None = None
        self._ended = asyncio.Event()
        self._writer: Writer | None = None
        self._started = 0.0
        self._lost: str | None = None

    def _at(self) -> float:
        return self.clock() - self._started

    def _stream(self, stream: str, value: Any) -> None:
        self._writer.stream(self._at(), stream, value)
        self.entries += 1

    async def _read(self, method: str, call: Awaitable[Any], **args: Any) -> None:
        try:
            value = await call
        except USER_ERRORS:  # a read that fails now (a volume not bound yet) is asked again later
            return
        self._writer.read(self._at(), method, args_key(**args), value)
        self.entries += 1

    async def run(self, stop: asyncio.Event | None = None) -> Recorded:
        """Record until the job ends or `stop` is set; NotFound (before any file is written) for
        a job that is not there."""
        self._summary = await self.cluster.get_job(self.job)
        self._started = self.clock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.path, self.job, self.cluster.capabilities.record, self._started,
                              {"log_lines_per_rank": self.lines_per_rank, "events": self.events,
                               "sample_seconds": self.sample_seconds})
        tasks = [asyncio.ensure_future(c) for c in (
            self._follow("watch_jobs", self.cluster.watch_jobs, self._job_seen),
            self._follow("watch_pods", lambda: self.cluster.watch_pods(self.job)),
            self._follow("watch_nodes", self.cluster.watch_nodes),
            self._follow("watch_events", self.cluster.watch_events, self._event_kept),
            self._sample())]
        logs = asyncio.ensure_future(self._logs())
        stopped = asyncio.ensure_future(stop.wait()) if stop is not None else None
        how = "interrupted"
        try:
            waits = {logs, *(t for t in [stopped] if t)}
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if stopped is not None and stopped in done:
                how = "stopped"
            else:
                if not self._ended.is_set():  # the logs closed first: the job's summary follows
                    await self._wait_for_end(stopped)
                how = "the job ended" if self._ended.is_set() else "stopped"
            how = self._lost or how
        finally:
            for task in (*tasks, logs, *(t for t in [stopped] if t)):
                task.cancel()
            await asyncio.gather(*tasks, logs, return_exceptions=True)
            await self._final_reads()
            seconds = self._at()
            self._writer.close(seconds, how, dict(self._dropped))
        return Recorded(self.path, self.job, seconds, self.entries, how, dict(self._dropped))

    async def _wait_for_end(self, stopped: asyncio.Future | None) -> None:
        waits = {asyncio.ensure_future(self._ended.wait()), *(t for t in [stopped] if t)}
        try:
            await asyncio.wait(waits, timeout=AFTER_THE_END, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                if task is not stopped:
                    task.cancel()

    def _job_seen(self, summary: JobSummary) -> bool:
        if summary.name != self.job:
            return False
        if not summary.same_job(self._summary):  # deleted and applied again: another job
            return False
        self._summary = summary
        if summary.phase.finished:
            self._ended.set()
        return True

    def _event_kept(self, event) -> bool:
        self._events += 1
        if self._events > self.events:
            self._dropped["Events"] += 1
            return False
        return True

    async def _follow(self, stream: str, open_stream: Callable[[], AsyncIterator[Any]],
                      keep: Callable[[Any], bool] = lambda value: True) -> None:
        try:
            async for item in open_stream():
                if keep(item):
                    self._stream(stream, item)
        except USER_ERRORS as exc:
            self._lost = self._lost or f"lost {stream}: {one_line(exc)}"

    async def _logs(self) -> None:
        """The job's merged logs from its start, every rank, until the job ends."""
        try:
            async for batch in self.cluster.stream_logs(self.job, follow=True):
                kept = [line for line in batch if self._line_kept(line)]
                if kept:
                    self._stream("stream_logs", kept)
        except USER_ERRORS as exc:
            self._lost = self._lost or f"lost the logs: {one_line(exc)}"

    def _line_kept(self, line: LogLine) -> bool:
        self._lines[line.rank] += 1
        if self._lines[line.rank] > self.lines_per_rank:
            self._dropped[f"log lines of rank {line.rank}"] += 1
            return False
        return True

    async def _sample(self) -> None:
        sample = 0
        while True:
            await self._read("pod_usage", self.cluster.pod_usage(self.job), job=self.job)
            if sample % VOLUME_EVERY == 0:
                await self._read_volumes()
            sample += 1
            await asyncio.sleep(self.sample_seconds)

    async def _read_volumes(self) -> None:
        for volume in self._summary.volumes:
            await self._read("checkpoints", self.cluster.checkpoints(volume), volume=volume)
            await self._read("read_metrics", self.cluster.read_metrics(volume=volume), volume=volume)

    async def _final_reads(self) -> None:
        """What is read after the fact: the volumes, snapshots, checkpoints and run records."""
        await self._read("volumes", self.cluster.volumes())
        await self._read("snapshots", self.cluster.snapshots())
        await self._read_volumes()
        for volume, run in self._summary.run_dirs:
            await self._read("run_records", self.cluster.run_records(volume, run), volume=volume, run=run)
