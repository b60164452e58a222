"""`KubeCluster`: the Cluster protocol on Kubernetes with Kubeflow Trainer v2.3.

Declared resources go to the API server as they are (TrainJob, TrainingRuntime, PVC,
VolumeSnapshot, KubeRay's RayJob). A job is the TrainJob or else the RayJob of that name (one
namespace of job names, as on the embedded cluster); a RayJob's pods are found by KubeRay's labels
(rayjobs.py). Observers list then watch (watcher.ListWatch) in threads feeding asyncio; a
job's logs are followed pod by pod and merged (logs.LogFollowers); the checkpoint browser and
metrics come from a short-lived reader pod (reader.py); snapshots are CSI VolumeSnapshots.
"""

from __future__ import annotations

import asyncio
import secrets
from contextlib import aclosing
from typing import TYPE_CHECKING, AsyncIterator

from backend.cluster import ClusterError, InvalidResource, NotFound, Timeout
from backend.kube import preflight as setup
from backend.kube.connection import AlreadyExists, Connection, MissingType
from backend.kube.jobs import summarize
from backend.kube.logs import DEFAULT_LOG_READ_TIMEOUT, LogFollowers
from backend.kube.metrics import pod_usage
from backend.kube.pods import parse_time, pod_from
from backend.kube.rayjobs import cluster_name, pod_selectors, summarize_rayjob
from backend.kube.reader import BASE_IMAGE, READER_CONTAINER, checkpoints_from, metrics_from, run_reader
from backend.kube.resources import Resources, missing_type
from backend.kube.snapshots import (
    pick_class,
    restore_claim,
    snapshot_error,
    snapshot_from,
    snapshot_manifest,
)
from backend.kube.threads import Ended, cancel_all, drain, iterate_in_thread, pump
from backend.kube.watcher import DEFAULT_READ_TIMEOUT, ListWatch, WatchEvent, object_key, resource_version
from backend.models import (
    DEFAULT_RUNTIME,
    LABEL_JOB,
    Check,
    Checkpoint,
    JobPhase,
    JobSummary,
    LogLine,
    Pod,
    PodEvent,
    PodEventType,
    PodUsage,
    RunMetrics,
    Snapshot,
    TrainingRuntime,
    VolumeInfo,
    check_name,
)
from backend.settings import Settings

if TYPE_CHECKING:
    from backend.local.embedded import Embedded

# Lines per batch when a whole (not followed) log is handed over.
LOG_BATCH = 5000
JOB_KINDS = ("TrainJob", "RayJob")  # a TrainJob's summary also reads its JobSet


def _job_selector(job: str | None) -> str:
    return f"{LABEL_JOB}={job}" if job else LABEL_JOB


class KubeCluster:
    backend = "kube"

    def __init__(self, conn: Connection, kfp_host: str | None = None, *,
                 watch_read_timeout: float = DEFAULT_READ_TIMEOUT,
                 log_read_timeout: float = DEFAULT_LOG_READ_TIMEOUT,
                 reader_timeout: float = 180.0, snapshot_timeout: float = 120.0,
                 embedded: "Embedded | None" = None) -> None:
        self.conn = conn
        self.embedded = embedded  # the embedded cluster's lifecycle, when that is what this drives
        self.resources = Resources(conn)
        self.kfp_host = kfp_host
        self.watch_read_timeout = watch_read_timeout
        self.log_read_timeout = log_read_timeout
        self.reader_timeout = reader_timeout
        self.snapshot_timeout = snapshot_timeout

    @classmethod
    def from_settings(cls, settings: Settings, embedded: "Embedded | None" = None) -> "KubeCluster":
        """Reads the kubeconfig (no network yet); Unavailable in one line if it cannot. On the
        embedded cluster a connection that loses the API server starts it again. The Pipelines
        endpoint is the one runs are submitted to; none on the embedded cluster, whose pipelines
        run with kfp.local (backend/pipelines/runs.py)."""
        conn = Connection.open(settings)
        if embedded is not None:
            conn.revive = embedded.revive
        kfp_host = (settings.kfp_host or setup.DEFAULT_KFP_HOST) if settings.backend == "kube" else None
        return cls(conn, kfp_host=kfp_host, embedded=embedded)

    @property
    def namespace(self) -> str:
        return self.conn.namespace

    # ------------------------------------------------------------------ declared resources

    async def apply(self, resource) -> str:
        return await self.resources.apply(resource.to_manifest())

    async def delete(self, kind: str, name: str) -> None:
        await self.resources.delete(kind, name)

    # ------------------------------------------------------------------ jobs

    async def get_job(self, name: str) -> JobSummary:
        try:
            trainjob = await self.resources.get("TrainJob", name)
        except NotFound as missing:
            rayjob = await self.resources.find("RayJob", name)  # None too without KubeRay
            if rayjob is None:
                raise missing from None
            return summarize_rayjob(rayjob)
        return summarize(trainjob, await self.resources.find("JobSet", name))

    async def list_jobs(self) -> list[JobSummary]:
        trainjobs, jobsets, rayjobs = await asyncio.gather(
            self.resources.list("TrainJob"), self.resources.list("JobSet"), self._rayjobs())
        by_name = {j["metadata"]["name"]: j for j in jobsets}
        summaries = [summarize(t, by_name.get(t["metadata"]["name"])) for t in trainjobs]
        names = {s.name for s in summaries}
        summaries += [summarize_rayjob(r) for r in rayjobs if r["metadata"]["name"] not in names]
        return sorted(summaries, key=lambda s: (s.created, s.name))

    async def _rayjobs(self) -> list[dict]:
        """Every RayJob; none on a cluster without KubeRay."""
        try:
            return await self.resources.list("RayJob")
        except MissingType:
            return []

    def watch_jobs(self) -> AsyncIterator[JobSummary]:
        return self._job_summaries(None)

    async def _job_summaries(self, name: str | None) -> AsyncIterator[JobSummary]:
        """Summaries from a TrainJob, a JobSet (same names) and a RayJob watch: all once every
        watch has listed, then a job's again when its phase or restart attempt changes. On a
        cluster without KubeRay the RayJob watch ends at once (MissingType): no RayJobs."""
        selector = f"metadata.name={name}" if name else None
        kinds = ("TrainJob", "JobSet", "RayJob")
        queue: asyncio.Queue = asyncio.Queue()
        tasks = [pump(self._watch(kind, field_selector=selector), queue, kind) for kind in kinds]
        objects: dict[str, dict[str, dict]] = {kind: {} for kind in kinds}
        synced: set[str] = set()
        shown: dict[str, tuple] = {}

        def jobs() -> list[str]:
            return list(objects["TrainJob"]) + [k for k in objects["RayJob"] if k not in objects["TrainJob"]]

        try:
            while True:
                tag, item = await queue.get()
                if isinstance(item, Ended) and not (tag == "RayJob" and isinstance(item.error, MissingType)):
                    raise item.error or ClusterError(f"the {tag} watch ended")
                if isinstance(item, Ended) or item.type == "SYNCED":  # no KubeRay: nothing to list
                    synced.add(tag)
                    changed = jobs() if len(synced) == len(kinds) else []
                else:
                    event: WatchEvent = item
                    key = event.object["metadata"]["name"]
                    if event.type == "DELETED":
                        objects[tag].pop(key, None)
                        if tag in JOB_KINDS:
                            shown.pop(key, None)
                            if name:
                                raise NotFound(f"{tag} {name} was deleted")
                    else:
                        objects[tag][key] = event.object
                    changed = [key] if len(synced) == len(kinds) and key in jobs() else []
                for key in changed:
                    if key in objects["TrainJob"]:
                        summary = summarize(objects["TrainJob"][key], objects["JobSet"].get(key))
                    else:
                        summary = summarize_rayjob(objects["RayJob"][key])
                    state = (summary.phase, summary.restart_attempt)
                    if shown.get(key) != state:
                        shown[key] = state
                        yield summary
        finally:
            await cancel_all(tasks)

    async def wait_job(self, name: str, until: frozenset[JobPhase], timeout: float) -> JobSummary:
        last = await self.get_job(name)
        kind = "RayJob" if last.launcher == "ray" else "TrainJob"
        try:
            async with asyncio.timeout(timeout):
                async for summary in self._job_summaries(name):
                    last = summary
                    if summary.phase in until or summary.phase.finished:
                        return summary
        except TimeoutError:
            wanted = " or ".join(sorted(p.value for p in until))
            raise Timeout(f"{kind} {name} is still {last.phase.value} after {timeout:.0f}s "
                          f"(waited for {wanted})") from None
        raise ClusterError(f"the watch of {kind} {name} ended")

    # ------------------------------------------------------------------ pods

    async def _pod_selectors(self, job: str | None, wait: bool = False) -> list[str]:
        """Label selectors whose union is a job's pods (every TrainJob's for None). A RayJob's
        pods carry KubeRay's labels; its Ray cluster's are found by the cluster's name, which
        KubeRay writes on its first reconcile: `wait` for it (on the RayJob's watch)."""
        if job is None or await self.resources.find("TrainJob", job) is not None:
            return [_job_selector(job)]
        rayjob = await self.resources.find("RayJob", job)
        if rayjob is None:
            return [_job_selector(job)]
        if wait and not cluster_name(rayjob):
            async with aclosing(self._watch("RayJob", field_selector=f"metadata.name={job}")) as events:
                async for event in events:
                    if event.type == "DELETED":
                        raise NotFound(f"RayJob {job} was deleted")
                    if event.type != "SYNCED" and (cluster_name(event.object)
                                                   or summarize_rayjob(event.object).phase.finished):
                        rayjob = event.object
                        break
        return pod_selectors(rayjob)

    async def _list_raw_pods(self, selectors: list[str]) -> list[dict]:
        found: dict[str, dict] = {}
        for selector in selectors:
            for raw in await self.resources.list("Pod", label_selector=selector):
                found[object_key(raw)] = raw
        return list(found.values())

    async def list_pods(self, job: str | None = None) -> list[Pod]:
        pods = [pod_from(p, job=job or "") for p in await self._list_raw_pods(await self._pod_selectors(job))]
        return sorted(pods, key=lambda p: (p.job, p.restart_attempt, p.rank, p.name))

    async def watch_pods(self, job: str | None = None) -> AsyncIterator[PodEvent]:
        """Pod events from the watch, plus a MODIFIED whenever a pod's last step/loss (from its
        followed log) moves; step updates of one burst of log reads are coalesced."""
        selectors = await self._pod_selectors(job, wait=True)
        queue: asyncio.Queue = asyncio.Queue()
        followers = LogFollowers(self.conn, queue, self.log_read_timeout)
        tasks = [pump(self._watch_pods(selectors), queue, "pod")]
        pods: dict[str, Pod] = {}
        try:
            while True:
                items = await drain(queue)
                progress: dict[str, LogLine] = {}
                for tag, item in items:
                    if tag == "pod":
                        if isinstance(item, Ended):
                            raise item.error or ClusterError("the pod watch ended")
                        if item.type == "SYNCED":
                            continue
                        for event in self._progress_events(pods, progress):
                            yield event
                        deleted = item.type == "DELETED"
                        pod = pod_from(item.object, deleted=deleted, job=job or "")
                        previous = pods.pop(pod.name, None) if deleted else pods.get(pod.name)
                        if previous is not None:
                            pod = pod.model_copy(update={"last_step": previous.last_step,
                                                         "last_loss": previous.last_loss})
                        if not deleted:
                            pods[pod.name] = pod
                            followers.start(item.object)
                        yield PodEvent(type=PodEventType(item.type), pod=pod)
                    elif not isinstance(item, Ended):  # log lines; a log that ends changes nothing
                        for line in item:
                            if line.step is not None:
                                progress[line.pod] = line
                for event in self._progress_events(pods, progress):
                    yield event
        finally:
            await cancel_all(tasks)
            await followers.close()

    @staticmethod
    def _progress_events(pods: dict[str, Pod], progress: dict[str, LogLine]) -> list[PodEvent]:
        events = []
        for name, line in progress.items():
            pod = pods.get(name)
            if pod is not None and (pod.last_step, pod.last_loss) != (line.step, line.loss):
                pod = pods[name] = pod.model_copy(update={"last_step": line.step, "last_loss": line.loss})
                events.append(PodEvent(type=PodEventType.MODIFIED, pod=pod))
        progress.clear()
        return events

    async def pod_usage(self, job: str | None = None) -> dict[str, PodUsage] | None:
        return await pod_usage(self.resources, await self._pod_selectors(job))

    async def kill_pod(self, name: str) -> None:
        try:
            await self.resources.delete("Pod", name, grace_period=0)
        except NotFound:
            raise NotFound(f"pod {name} not found in namespace {self.namespace}") from None

    # ------------------------------------------------------------------ logs

    async def stream_logs(self, job: str, follow: bool = True) -> AsyncIterator[list[LogLine]]:
        await self.get_job(job)  # NotFound before anything starts
        selectors = await self._pod_selectors(job, wait=follow)
        if not follow:
            async for batch in self._whole_logs(selectors):
                yield batch
            return
        queue: asyncio.Queue = asyncio.Queue()
        followers = LogFollowers(self.conn, queue, self.log_read_timeout)
        tasks = [pump(self._watch_pods(selectors), queue, "pod"),
                 pump(self._job_summaries(job), queue, "job")]
        finished = False
        try:
            while True:
                items = await drain(queue)
                batch: list[LogLine] = []
                for tag, item in items:
                    if isinstance(item, Ended):
                        if item.error is not None:
                            raise item.error
                        if tag != "log":
                            raise ClusterError(f"the {tag} watch of job {job} ended")
                    elif tag == "pod" and item.type in ("ADDED", "MODIFIED"):
                        followers.start(item.object)
                    elif tag == "job" and item.phase.finished and not finished:
                        finished = True
                        # Pods that started after the last pod event we saw: read them too.
                        for raw in await self._list_raw_pods(selectors):
                            followers.start(raw)
                    elif tag == "log":
                        batch.extend(item)
                if batch:
                    batch.sort(key=lambda line: line.time)
                    yield batch
                if finished and followers.idle():
                    return
        finally:
            await cancel_all(tasks)
            await followers.close()

    async def _whole_logs(self, selectors: list[str]) -> AsyncIterator[list[LogLine]]:
        queue: asyncio.Queue = asyncio.Queue()
        followers = LogFollowers(self.conn, queue, self.log_read_timeout)
        try:
            for raw in await self._list_raw_pods(selectors):
                followers.start(raw, follow=False)
            lines: list[LogLine] = []
            while not followers.idle() or not queue.empty():
                _, item = await queue.get()
                if isinstance(item, Ended):
                    if item.error is not None:
                        raise item.error
                else:
                    lines.extend(item)
        finally:
            await followers.close()
        lines.sort(key=lambda line: line.time)
        for start in range(0, len(lines), LOG_BATCH):
            yield lines[start:start + LOG_BATCH]

    # ------------------------------------------------------------------ volumes and checkpoints

    async def volumes(self) -> list[VolumeInfo]:
        claims = await self.resources.list("PersistentVolumeClaim")
        return [VolumeInfo(
            name=c["metadata"]["name"],
            created=parse_time(c["metadata"].get("creationTimestamp")),
            capacity=str(((c.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "")),
        ) for c in claims]

    async def checkpoints(self, volume: str) -> list[Checkpoint]:
        await self.resources.get("PersistentVolumeClaim", volume)
        found = checkpoints_from(volume, await self._read_volume(volume))
        return sorted(found, key=lambda c: (c.run, c.step, c.path))

    async def read_metrics(self, volume: str | None = None, snapshot: str | None = None) -> list[RunMetrics]:
        """metrics.json of every run on a volume (default: every volume), or in a snapshot
        (restored into a temporary PVC that is deleted afterwards)."""
        if snapshot is not None:
            return metrics_from(await self._read_snapshot(snapshot))
        if volume is not None:
            await self.resources.get("PersistentVolumeClaim", volume)
            return metrics_from(await self._read_volume(volume))
        found: list[RunMetrics] = []
        image = await self._reader_image()  # once for all the volumes
        for info in await self.volumes():
            found += metrics_from(await self._read_volume(info.name, image))
        return found

    async def _read_snapshot(self, snapshot: str) -> dict:
        raw = await self.resources.get("VolumeSnapshot", snapshot)
        if not (raw.get("status") or {}).get("readyToUse"):
            raise ClusterError(f"snapshot {snapshot} is not ready to use yet")
        claim = restore_claim(f"kfcockpit-restore-{secrets.token_hex(3)}", raw,
                              await self.resources.find("PersistentVolumeClaim", snapshot_from(raw).volume))
        await self.resources.create(claim)
        try:
            return await self._read_volume(claim["metadata"]["name"])
        finally:
            await asyncio.shield(self._delete_quietly("PersistentVolumeClaim", claim["metadata"]["name"]))

    async def _read_volume(self, claim: str, image: str | None = None) -> dict:
        return await run_reader(
            create=self.resources.create,
            delete=lambda name: self._delete_quietly("Pod", name, grace_period=0),
            watch=self._watch_one_pod,
            read_log=self._reader_log,
            claim=claim,
            image=image or await self._reader_image(),
            timeout=self.reader_timeout,
        )

    async def _reader_image(self) -> str:
        """The image the lesson's runtime runs (on the nodes already), else the pinned base image."""
        runtime = await self.resources.find("TrainingRuntime", DEFAULT_RUNTIME)
        if runtime:
            try:
                return TrainingRuntime.model_validate(runtime).trainer_container().get("image") or BASE_IMAGE
            except ValueError:
                pass
        return BASE_IMAGE

    async def _watch_one_pod(self, name: str) -> AsyncIterator[dict]:
        async for event in self._watch("Pod", field_selector=f"metadata.name={name}"):
            if event.type == "DELETED":
                raise ClusterError(f"pod {name} was deleted before it finished")
            if event.type != "SYNCED":
                yield event.object

    async def _reader_log(self, name: str) -> str:
        return await self.conn.call(self.resources.core.read_namespaced_pod_log, name, self.namespace,
                                    container=READER_CONTAINER, what=f"log of pod {name}")

    async def _delete_quietly(self, kind: str, name: str, grace_period: int | None = None) -> None:
        """Clean-up that must not hide the real outcome: a failure here is not the user's problem
        (the reader pod also ends itself through activeDeadlineSeconds)."""
        try:
            await self.resources.delete(kind, name, grace_period=grace_period)
        except ClusterError:
            pass

    # ------------------------------------------------------------------ snapshots

    async def snapshot(self, volume: str, name: str) -> Snapshot:
        """A CSI VolumeSnapshot of `volume`, once ready. What the volume held (files, size, runs)
        is read by the reader pod just before and kept in an annotation, so listing snapshots
        needs no restore; it is exact for a volume no job is writing to."""
        try:
            check_name(name, "snapshot name")
        except ValueError as exc:
            raise InvalidResource(str(exc)) from None
        claim = await self.resources.get("PersistentVolumeClaim", volume)
        if await self.resources.find("VolumeSnapshot", name):
            raise InvalidResource(f"snapshot {name} already exists (choose another name)")
        storage_class, driver = await setup.volume_driver(self.resources, claim)
        class_name = pick_class(await self.resources.list("VolumeSnapshotClass"), driver)
        if class_name is None:
            raise ClusterError(f"volume {volume} cannot be snapshotted: no VolumeSnapshotClass for driver "
                               f"{driver or '?'} of StorageClass {storage_class or '?'} "
                               f"({setup.INSTALL_SNAPSHOTS})")
        contents = await self._read_volume(volume)
        try:
            await self.resources.create(snapshot_manifest(volume, name, class_name, contents))
        except AlreadyExists:
            raise InvalidResource(f"snapshot {name} already exists (choose another name)") from None
        return snapshot_from(await self._wait_snapshot(name))

    async def _wait_snapshot(self, name: str) -> dict:
        """The snapshot once readyToUse; after snapshot_timeout as it is (ready False), unless the
        snapshot controller reports an error."""
        last: dict = {}
        try:
            async with asyncio.timeout(self.snapshot_timeout):
                async for event in self._watch("VolumeSnapshot", field_selector=f"metadata.name={name}"):
                    if event.type == "DELETED":
                        raise ClusterError(f"snapshot {name} was deleted while it was being taken")
                    if event.type == "SYNCED":
                        continue
                    last = event.object
                    if (last.get("status") or {}).get("readyToUse"):
                        return last
        except TimeoutError:
            if snapshot_error(last):
                raise ClusterError(f"snapshot {name} failed: {snapshot_error(last)}") from None
        return last or await self.resources.get("VolumeSnapshot", name)

    async def snapshots(self) -> list[Snapshot]:
        found = [snapshot_from(raw) for raw in await self.resources.list("VolumeSnapshot")]
        return sorted(found, key=lambda s: (s.created, s.name))

    # ------------------------------------------------------------------ setup

    async def preflight(self) -> list[Check]:
        own = await self.embedded.checks() if self.embedded is not None else []
        return own + await setup.preflight(self.resources, self.kfp_host)

    async def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ watches

    async def _watch_pods(self, selectors: list[str]) -> AsyncIterator[WatchEvent]:
        """One pod watch over the union of label selectors: a pod two of them match is reported
        once (ADDED, then MODIFIED when its resourceVersion moves, DELETED when no selector
        matches it any more); SYNCED once every watch has listed."""
        if len(selectors) == 1:
            async for event in self._watch("Pod", label_selector=selectors[0]):
                yield event
            return
        queue: asyncio.Queue = asyncio.Queue()
        tasks = [pump(self._watch("Pod", label_selector=selector), queue, selector) for selector in selectors]
        matched: dict[str, set[str]] = {}  # pod -> the selectors that match it
        versions: dict[str, str] = {}  # pod -> the resourceVersion last reported
        synced: set[str] = set()
        try:
            while True:
                selector, item = await queue.get()
                if isinstance(item, Ended):
                    raise item.error or ClusterError("the pod watch ended")
                if item.type == "SYNCED":
                    synced.add(selector)
                    if len(synced) == len(selectors):
                        yield item
                    continue
                key = object_key(item.object)
                holders = matched.setdefault(key, set())
                if item.type == "DELETED":
                    holders.discard(selector)
                    if not holders:
                        del matched[key]
                        versions.pop(key, None)
                        yield item
                    continue
                new = not holders
                holders.add(selector)
                if versions.get(key) != resource_version(item.object):
                    versions[key] = resource_version(item.object)
                    yield WatchEvent("ADDED" if new else "MODIFIED", item.object)
        finally:
            await cancel_all(tasks)

    def _watch(self, kind: str, label_selector: str | None = None,
               field_selector: str | None = None) -> AsyncIterator[WatchEvent]:
        fn, args = self.resources.bind("list", kind)
        watch = ListWatch(self.conn, fn, *args, label_selector=label_selector, field_selector=field_selector,
                          read_timeout=self.watch_read_timeout, what=f"{kind} watch",
                          missing=missing_type(kind))
        return iterate_in_thread(watch, f"watch-{kind}")
