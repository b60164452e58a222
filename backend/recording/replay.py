"""A read-only Cluster that plays a recording back: every method of the protocol answers as the
recorded cluster did at the playhead's position, so the cockpit's views work on it unchanged.

Streams give their recorded items as the playhead reaches each one's time (all of those before
it at once: `--from`, a seek forward); reads give the newest result recorded at or before it.
What the cockpit folds from a watch anyway (the job list, a job's pods, a rank's last lines) is
folded here from the same items, so a read never disagrees with the watch. What would change a
cluster raises `ReadOnly`, one line; the Capabilities say so first (`read_only`), and carry the
playhead (`playback`) for the cockpit's pause, seek and speed keys.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Collection, Iterable

from backend.cluster import Capabilities
from backend.errors import ClusterError, NotFound, Timeout, Unavailable
from backend import models as m
from backend.recording.format import Entry, Recording, args_key
from backend.recording.playhead import Playhead


class ReadOnly(ClusterError):
    """What would change a cluster, asked of a replay."""


class ReplayCluster:
    def __init__(self, recording: Recording, playhead: Playhead) -> None:
        self.recording = recording
        self.playhead = playhead
        self._streams: dict[str, list[Entry]] = {}
        self._reads: dict[str, list[Entry]] = {}
        for entry in recording.entries:
            if entry.stream is not None:
                self._streams.setdefault(entry.stream, []).append(entry)
            elif entry.read is not None:
                self._reads.setdefault(entry.read, []).append(entry)
        name = Path(recording.source).name or "a recording"
        self.read_only = f"a replay of {name}: nothing here changes a cluster (kill, fail, freeze, run)"
        self.capabilities = Capabilities(
            description=f"a replay of {name}", record=f"replay of {name}, recorded on {recording.cluster}",
            read_only=self.read_only, playback=playhead)

    def now(self) -> float:
        """The recorded cluster's wall clock at the playhead (the cockpit's clock in a replay)."""
        return self.recording.started + self.playhead.position()

    # ------------------------------------------------------------------ the recording as of now

    def _until_now(self, stream: str) -> Iterable[Any]:
        position = self.playhead.position()
        return (e.value for e in self._streams.get(stream, ()) if e.at <= position)

    def _jobs_now(self) -> dict[str, m.JobSummary]:
        jobs: dict[str, m.JobSummary] = {}
        for summary in self._until_now("watch_jobs"):
            jobs[summary.name] = summary
        return jobs

    def _read(self, method: str, default: Any, loose: bool = False, **args: Any) -> Any:
        """The newest result of `method(**args)` recorded by now (else its first); with `loose`,
        of any arguments when these were never recorded (a sample of every rank serves a few)."""
        key = args_key(**args)
        entries = [e for e in self._reads.get(method, ()) if e.args == key]
        if not entries and loose:
            entries = self._reads.get(method, [])
        if not entries:
            return default
        position = self.playhead.position()
        before = [e for e in entries if e.at <= position]
        return (before[-1] if before else entries[0]).value

    async def _play(self, stream: str, keep: Callable[[Any], bool] = lambda value: True,
                    ends: bool = False) -> AsyncIterator[Any]:
        """The stream's items as the playhead reaches them. After the last it waits, as a live
        watch does, unless `ends`; the playhead going back ends it as a lost watch, to be opened
        again from there."""
        generation = self.playhead.generation
        for entry in self._streams.get(stream, ()):
            if not await self.playhead.reach(entry.at, generation):
                raise Unavailable(f"the replay went back to {self.playhead.position():.0f}s")
            if keep(entry.value):
                yield entry.value
        if ends and not self.playhead.loop:
            return
        await self.playhead.went_back(generation)
        raise Unavailable("the replay starts again")

    def _refuse(self, what: str) -> ReadOnly:
        return ReadOnly(f"{what}: {self.read_only}")

    # ------------------------------------------------------------------ the protocol: reads

    async def get_job(self, name: str) -> m.JobSummary:
        jobs = self._jobs_now()
        if name in jobs:
            return jobs[name]
        first = next((s for s in self._until_any("watch_jobs") if s.name == name), None)
        if first is None:
            raise NotFound(f"no job named {name} in the recording (it holds {self.recording.job})")
        return first

    def _until_any(self, stream: str) -> Iterable[Any]:
        return (e.value for e in self._streams.get(stream, ()))

    async def list_jobs(self) -> list[m.JobSummary]:
        return list(self._jobs_now().values())

    async def list_pods(self, job: str | None = None) -> list[m.Pod]:
        pods: dict[str, m.Pod] = {}
        for event in self._until_now("watch_pods"):
            if job is not None and event.pod.job != job:
                continue
            if event.type.value == "DELETED":
                pods.pop(event.pod.name, None)
            else:
                pods[event.pod.name] = event.pod
        return list(pods.values())

    async def explain(self, job: str, rank: int = 1):
        await self.get_job(job)
        raise Unavailable(f"explain {job}: a replay holds what the cockpit watched, not the job's objects; "
                          "kfcockpit explain needs the live cluster")

    async def list_events(self) -> list[m.ClusterEvent]:
        return list(self._until_now("watch_events"))

    def watch_pods(self, job: str | None = None) -> AsyncIterator[m.PodEvent]:
        return self._play("watch_pods", lambda event: job is None or event.pod.job == job)

    def watch_jobs(self) -> AsyncIterator[m.JobSummary]:
        return self._play("watch_jobs")

    def watch_nodes(self) -> AsyncIterator[m.NodeEvent]:
        return self._play("watch_nodes")

    def watch_events(self) -> AsyncIterator[m.ClusterEvent]:
        return self._play("watch_events")

    def stream_logs(self, job: str, follow: bool = True,
                    focus: m.LogFocus | None = None) -> AsyncIterator[list[m.LogLine]]:
        def wanted(batch: list[m.LogLine]) -> list[m.LogLine]:
            return [line for line in batch if focus is None or focus.wants(line.rank)]

        async def logs() -> AsyncIterator[list[m.LogLine]]:
            await self.get_job(job)  # NotFound at once, as live
            if not follow:
                for batch in self._until_now("stream_logs"):
                    if kept := wanted(batch):
                        yield kept
                return
            async for batch in self._play("stream_logs", ends=focus is None):
                if kept := wanted(batch):
                    yield kept

        return logs()

    async def pod_log(self, pod: str, previous: bool = False) -> list[m.LogLine]:
        """What the recording holds of the pod's lines (the ranks the cockpit read); a previous
        container's log was never watched."""
        if previous:
            raise Unavailable(f"pod {pod}'s previous log: a replay holds what the cockpit watched; "
                              "kubectl logs -p needs the live cluster")
        return [line for batch in self._until_now("stream_logs") for line in batch if line.pod == pod]

    async def last_lines(self, job: str, ranks: Collection[int], count: int = 2) -> list[m.LogLine]:
        said: dict[int, list[m.LogLine]] = {rank: [] for rank in ranks}
        for batch in self._until_now("stream_logs"):
            for line in batch:
                if line.rank in said:
                    said[line.rank] = [*said[line.rank][-(count - 1):], line] if count > 1 else [line]
        return [line for lines in said.values() for line in lines]

    async def pod_usage(self, job: str | None = None,
                        ranks: Collection[int] | None = None) -> dict[str, m.PodUsage] | None:
        return self._read("pod_usage", None, loose=True, job=job)

    async def wait_job(self, name: str, until: frozenset[m.JobPhase], timeout: float) -> m.JobSummary:
        async def reached() -> m.JobSummary:
            job = await self.get_job(name)
            if job.phase in until or job.phase.finished:
                return job
            async for summary in self._play("watch_jobs", lambda s: s.name == name, ends=True):
                if summary.phase in until or summary.phase.finished:
                    return summary
            return await self.get_job(name)

        try:
            return await asyncio.wait_for(reached(), timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"{name} did not reach {', '.join(p.value for p in until)} in {timeout:.0f}s") from None

    async def volumes(self) -> list[m.VolumeInfo]:
        return self._read("volumes", [])

    async def wait_volume(self, volume: str, timeout: float) -> None:
        if volume not in {v.name for v in await self.volumes()}:
            raise NotFound(f"no volume {volume} in the recording")

    async def checkpoints(self, volume: str) -> list[m.Checkpoint]:
        return self._read("checkpoints", [], volume=volume)

    async def snapshots(self) -> list[m.Snapshot]:
        return self._read("snapshots", [])

    async def read_metrics(self, volume: str | None = None, snapshot: str | None = None) -> list[m.RunMetrics]:
        return self._read("read_metrics", [], volume=volume, snapshot=snapshot)

    async def run_records(self, volume: str, run: str) -> list[tuple[float, str]]:
        return [tuple(pair) for pair in self._read("run_records", [], volume=volume, run=run)]

    async def preflight(self) -> list[m.Check]:
        return []

    async def close(self) -> None:
        return None

    # ------------------------------------------------------------------ the protocol: changes, refused

    async def apply(self, resource) -> str:
        raise self._refuse("apply")

    async def delete(self, kind, name: str) -> None:
        raise self._refuse(f"delete {kind}/{name}")

    async def cordon_node(self, name: str, unschedulable: bool) -> None:
        raise self._refuse(f"{'cordon' if unschedulable else 'uncordon'} {name}")

    async def kill_pod(self, name: str) -> None:
        raise self._refuse(f"kill {name}")

    async def freeze_pod(self, name: str, frozen: bool) -> None:
        raise self._refuse(f"{'freeze' if frozen else 'thaw'} {name}")

    async def slow_pod(self, name: str, factor: float) -> None:
        raise self._refuse(f"slow {name}")

    async def snapshot(self, volume: str, name: str) -> m.Snapshot:
        raise self._refuse(f"snapshot {volume}")
