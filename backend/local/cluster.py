"""`LocalCluster`: the Cluster protocol on the embedded cluster.

Jobs, pods and logs come from the controller (started on demand) over its socket; watches and
log follows reconnect when the controller goes away (starting a new one) and resume from the
last resourceVersion or log offset, re-listing when the controller says the version is gone.
Volumes, checkpoints, snapshots and metrics are files under the state root and are read here
directly, by this process: a separate reader, never the workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path
from typing import AsyncIterator


from backend.cluster import NotFound, Timeout, Unavailable
from backend.local import volumes as vol
from backend.local import wire
from backend.local.client import STOPPED_MESSAGE, ControllerClient
from backend.local.layout import Layout
from backend.models import (
    DEFAULT_RUNTIME,
    Check,
    Checkpoint,
    JobPhase,
    JobSummary,
    LogLine,
    Pod,
    PodEvent,
    PodEventType,
    RunMetrics,
    Snapshot,
    VolumeInfo,
)

LESSON_VOLUME = "checkpoints"
_RECONNECTS = 5  # consecutive lost connections without progress before giving up


class LocalCluster:
    backend = "local"

    def __init__(self, home: Path):
        self.layout = Layout(home)
        self.client = ControllerClient(self.layout)

    # ------------------------------------------------------------------ resources

    async def apply(self, resource) -> str:
        # explicit: applying starts a stopped cluster (`cluster down` holds only until a user acts)
        return (await self.client.call("apply", explicit=True, manifest=resource.to_manifest()))["result"]

    async def delete(self, kind: str, name: str) -> None:
        await self.client.call("delete", kind=kind, name=name)

    async def get_job(self, name: str) -> JobSummary:
        return JobSummary.model_validate((await self.client.call("get_job", name=name))["job"])

    async def list_jobs(self) -> list[JobSummary]:
        return [JobSummary.model_validate(j) for j in (await self.client.call("list_jobs"))["jobs"]]

    async def list_pods(self, job: str | None = None) -> list[Pod]:
        return [Pod.model_validate(p) for p in (await self.client.call("list_pods", job=job))["pods"]]

    async def kill_pod(self, name: str) -> None:
        await self.client.call("kill_pod", name=name)

    # ------------------------------------------------------------------ watches

    async def _watch(self, kind: str, job: str | None) -> AsyncIterator[tuple[str, dict]]:
        """(event type, object) for `kind`: a list as ADDED, then changes; survives reconnects."""
        known: dict[str, dict] = {}
        since: str | None = None
        lost = 0
        while True:
            reader, writer = await self.client.open_stream({"op": "watch", "kind": kind, "job": job, "since": since})
            listing: dict[str, dict] | None = None if since else {}
            try:
                async for message in _messages(reader):  # ends when the controller goes away
                    kind_of = message.get("type")
                    if kind_of == "GONE":
                        since = None
                        break
                    if kind_of == "SYNCED":
                        since, lost = message["rv"], 0
                        for name in [n for n in known if n not in listing]:
                            yield "DELETED", known.pop(name)
                        for name, obj in listing.items():
                            if known.get(name) != obj:
                                yield ("MODIFIED" if name in known else "ADDED"), obj
                                known[name] = obj
                        listing = None
                        continue
                    obj = message["object"]
                    if listing is not None:
                        listing[obj["name"]] = obj
                        continue
                    since, lost = message["rv"], 0
                    if kind_of == "DELETED":
                        known.pop(obj["name"], None)
                    else:
                        known[obj["name"]] = obj
                    yield kind_of, obj
            finally:
                writer.close()
            lost = self._count_lost(lost)

    async def watch_pods(self, job: str | None = None) -> AsyncIterator[PodEvent]:
        async with contextlib.aclosing(self._watch("pods", job)) as events:
            async for event_type, obj in events:
                yield PodEvent(type=PodEventType(event_type), pod=Pod.model_validate(obj))

    async def watch_jobs(self) -> AsyncIterator[JobSummary]:
        async with contextlib.aclosing(self._watch("jobs", None)) as events:
            async for event_type, obj in events:
                if event_type != "DELETED":
                    yield JobSummary.model_validate(obj)

    async def wait_job(self, name: str, until: frozenset[JobPhase], timeout: float) -> JobSummary:
        seen: list[JobSummary] = []

        async def watch() -> JobSummary:
            async with contextlib.aclosing(self._watch("jobs", name)) as events:
                async for event_type, obj in events:
                    if event_type == "DELETED":
                        raise NotFound(f"trainjob {name!r} was deleted while waiting for it")
                    job = JobSummary.model_validate(obj)
                    seen.append(job)
                    if job.phase in until or job.phase.finished:
                        return job
            raise Unavailable("the job watch ended")  # pragma: no cover - _watch never ends by itself

        await self.get_job(name)  # NotFound at once for a job that does not exist
        try:
            return await asyncio.wait_for(watch(), timeout)
        except asyncio.TimeoutError:
            phase = seen[-1].phase.value if seen else "unknown"
            raise Timeout(f"trainjob {name} is still {phase} after {timeout:g}s") from None

    async def stream_logs(self, job: str, follow: bool = True) -> AsyncIterator[list[LogLine]]:
        offsets: dict[str, int] = {}
        lost = 0
        while True:
            reader, writer = await self.client.open_stream(
                {"op": "logs", "job": job, "follow": follow, "offsets": offsets})
            try:
                async for message in _messages(reader):
                    if message.get("end"):
                        return
                    offsets.update(message.get("offsets", {}))
                    lost = 0
                    batch = [LogLine.parsed(*line) for line in message.get("lines", [])]
                    if batch:
                        yield batch
            finally:
                writer.close()
            lost = self._count_lost(lost)

    def _count_lost(self, lost: int) -> int:
        """Streams reconnect when the controller goes away, but not forever without progress."""
        if lost + 1 > _RECONNECTS:
            raise Unavailable(f"lost the local cluster controller {lost + 1} times in a row; "
                              f"see {self.layout.controller_log}")
        return lost + 1

    # ------------------------------------------------------------------ volumes and snapshots (files)

    async def volumes(self) -> list[VolumeInfo]:
        return await asyncio.to_thread(self._volumes)

    def _volumes(self) -> list[VolumeInfo]:
        found = []
        for path in self.layout.claim_files():
            name = path.stem
            try:
                spec = (json.loads(path.read_text()) or {}).get("spec") or {}
                directory = self.layout.volume_dir(name)
                files, size = vol.tree_size(directory)
                created = directory.stat().st_mtime if directory.exists() else None
            except (OSError, ValueError):
                continue
            capacity = str(((spec.get("resources") or {}).get("requests") or {}).get("storage", ""))
            found.append(VolumeInfo(name=name, size_bytes=size, files=files, created=created, capacity=capacity))
        return found

    async def checkpoints(self, volume: str) -> list[Checkpoint]:
        directory = self.layout.require_volume(volume)
        return await asyncio.to_thread(vol.list_checkpoints, directory, volume)

    async def snapshot(self, volume: str, name: str) -> Snapshot:
        self.layout.volume_dir(volume)  # names checked here, before anything is sent
        self.layout.snapshot_dir(name)
        reply = await self.client.call("snapshot", explicit=True, volume=volume, name=name)
        return Snapshot.model_validate(reply["snapshot"])

    async def snapshots(self) -> list[Snapshot]:
        return await asyncio.to_thread(vol.list_snapshots, self.layout.snapshots)

    async def read_metrics(self, volume: str | None = None, snapshot: str | None = None) -> list[RunMetrics]:
        if snapshot is not None:
            directory = self.layout.snapshot_dir(snapshot) / vol.DATA
            if not directory.is_dir():
                raise NotFound(f"snapshot {snapshot!r} not found (see: kfcockpit snapshot list)")
            return await asyncio.to_thread(vol.find_metrics, directory)
        if volume is not None:
            return await asyncio.to_thread(vol.find_metrics, self.layout.require_volume(volume))
        found = []
        for info in await self.volumes():
            found += await asyncio.to_thread(vol.find_metrics, self.layout.volume_dir(info.name))
        return found

    # ------------------------------------------------------------------ the platform itself

    async def preflight(self) -> list[Check]:
        checks = []
        status = await self.client.ping()
        if status:
            checks.append(Check(name="controller", ok=True,
                                detail=f"running (pid {status['pid']}, up {time.time() - status['started']:.0f}s)"))
            warm = status.get("warm") or []
            problems = [w["problem"] for w in warm if w["problem"] and w["problem"] != "stopped"]
            ready = any(w["ready"] for w in warm)
            checks.append(Check(
                name="warm-workers", ok=not problems,
                detail=(f"pods run their command as is (slower start): {problems[0]}" if problems else
                        "pods start from a process with torch imported" if ready else
                        "warm workers start with the first runtime or job (kfcockpit cluster up starts them now)"),
                fix="" if not problems else f"see {self.layout.controller_log}"))
        else:
            stopped = self.layout.stopped.exists()
            checks.append(Check(name="controller", ok=False, fix="kfcockpit cluster up",
                                detail="the local cluster was stopped (kfcockpit cluster down)" if stopped
                                else "the local cluster controller is not running"))
        runtime = self.layout.object_file("TrainingRuntime", DEFAULT_RUNTIME).exists()
        checks.append(Check(name="runtime", ok=runtime,
                            detail=f"TrainingRuntime {DEFAULT_RUNTIME} {'applied' if runtime else 'not applied'}",
                            fix="" if runtime else "kfcockpit apply -f manifests/runtime.yaml"))
        volume = self.layout.object_file("PersistentVolumeClaim", LESSON_VOLUME).exists()
        checks.append(Check(name="volume", ok=volume,
                            detail=f"PersistentVolumeClaim {LESSON_VOLUME} {'present' if volume else 'not applied'}",
                            fix="" if volume else "kfcockpit apply -f manifests/volume.yaml"))
        torch = importlib.util.find_spec("torch") is not None
        checks.append(Check(name="torch", ok=torch, detail="torch importable by pods" if torch else "torch is not installed",
                            fix="" if torch else "make run (builds .venv with torch)"))
        problem = await asyncio.to_thread(self._hard_link_problem)
        checks.append(Check(name="snapshots", ok=not problem,
                            detail="hard-linked snapshots supported" if not problem else f"cannot hard-link: {problem}",
                            fix="" if not problem else "put KFCOCKPIT_HOME on a local filesystem"))
        return checks

    def _hard_link_problem(self) -> str:
        self.layout.create()
        with tempfile.TemporaryDirectory(dir=self.layout.root) as d:
            try:
                (Path(d) / "a").write_bytes(b"")
                os.link(Path(d) / "a", Path(d) / "b")
            except OSError as exc:
                return exc.strerror or str(exc)
        return ""

    async def up(self) -> dict:
        """Start the controller if needed (also after `down`), and its warm workers; its status."""
        return await self.client.call("up", explicit=True)

    async def down(self) -> int | None:
        """Stop the controller and every pod, and keep it stopped: watches and reads no longer
        start one (they get Unavailable) until `up`, `apply` or `snapshot`. The pid that stopped,
        or None if none ran."""
        return await self.client.shutdown()

    async def status(self) -> dict | None:
        return await self.client.ping()

    async def close(self) -> None:
        pass  # connections are per call and per stream; streams close with their iterators


async def _messages(reader: asyncio.StreamReader) -> AsyncIterator[dict]:
    """Messages of one stream until the connection drops; errors and shutdown raise."""
    while True:
        try:
            message = await wire.read(reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        if message is None:
            return
        wire.raise_if_error(message)
        if message.get("type") == "SHUTDOWN":
            raise Unavailable(STOPPED_MESSAGE)
        yield message

