"""What lies on volumes, as `KubeCluster` reads it: the PVCs, the checkpoints and metrics.json on
one (read by a short-lived reader pod, reader.py, never by the workers), and CSI VolumeSnapshots
of one (snapshots.py), whose contents are read just before they are taken. A snapshot's metrics
are read from a temporary PVC restored from it and deleted afterwards.
"""

from __future__ import annotations

import asyncio
import secrets

from backend.cluster import ClusterError, InvalidResource, NotFound, Timeout
from backend.kube import preflight as setup
from backend.kube.connection import AlreadyExists
from backend.kube.pods import parse_time
from backend.kube.reader import BASE_IMAGE, READER_CONTAINER, checkpoints_from, metrics_from, run_reader
from backend.kube.resources import Resources
from backend.kube.snapshots import pick_class, restore_claim, snapshot_error, snapshot_from, snapshot_manifest
from backend.kube.watches import Watches
from backend.models import DEFAULT_RUNTIME, Checkpoint, RunMetrics, Snapshot, TrainingRuntime, VolumeInfo, check_name


class VolumeOps:
    def __init__(self, resources: Resources, watches: Watches, reader_timeout: float,
                 snapshot_timeout: float) -> None:
        self.resources = resources
        self.watches = watches
        self.reader_timeout = reader_timeout
        self.snapshot_timeout = snapshot_timeout

    # ------------------------------------------------------------------ volumes and checkpoints

    async def volumes(self) -> list[VolumeInfo]:
        claims = await self.resources.list("PersistentVolumeClaim")
        return [VolumeInfo(
            name=c["metadata"]["name"],
            created=parse_time(c["metadata"].get("creationTimestamp")),
            capacity=str(((c.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "")),
        ) for c in claims]

    async def wait_bound(self, volume: str, timeout: float) -> None:
        """Return once the claim is Bound (`kubectl wait --for=jsonpath='{.status.phase}'=Bound`)."""
        seen = False
        try:
            async with asyncio.timeout(timeout):
                async for event in self.watches.watch("PersistentVolumeClaim",
                                                      field_selector=f"metadata.name={volume}"):
                    if event.type == "DELETED":
                        raise NotFound(f"volume {volume} was deleted while it was being provisioned")
                    if event.type == "SYNCED":
                        if not seen:
                            raise NotFound(f"volume {volume} not found (apply its PersistentVolumeClaim)")
                        continue
                    seen = True
                    if (event.object.get("status") or {}).get("phase") == "Bound":
                        return
        except TimeoutError:
            raise Timeout(f"volume {volume} is not bound after {timeout:.0f}s "
                          f"(kubectl describe pvc {volume} says why)") from None

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

    async def run_records(self, volume: str, run: str) -> list[tuple[float, str]]:
        """What the workers of the run in directory `run` recorded on `volume`
        (training/run_record.py), in time order."""
        await self.resources.get("PersistentVolumeClaim", volume)
        result = await self._read_volume(volume, args=("--records", run or "."))
        return [(float(at), str(line)) for at, line in result.get("records") or []]

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

    async def _read_volume(self, claim: str, image: str | None = None, args: tuple[str, ...] = ()) -> dict:
        return await run_reader(
            create=self.resources.create,
            delete=lambda name: self._delete_quietly("Pod", name, grace_period=0),
            watch=self.watches.one_pod,
            read_log=self._reader_log,
            claim=claim,
            image=image or await self._reader_image(),
            timeout=self.reader_timeout,
            args=args,
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

    async def _reader_log(self, name: str) -> str:
        return await self.resources.conn.call(self.resources.core.read_namespaced_pod_log, name,
                                              self.resources.namespace, container=READER_CONTAINER,
                                              what=f"log of pod {name}")

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
                               f"({setup.INSTALL_NFS if driver == setup.NFS_DRIVER else setup.INSTALL_SNAPSHOTS})")
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
                async for event in self.watches.watch("VolumeSnapshot", field_selector=f"metadata.name={name}"):
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
