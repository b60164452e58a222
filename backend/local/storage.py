"""The controller's volumes: a claim's directory, a new volume filled as a copy of its data
source, a snapshot's files, the directories a pod's mounts stand for, and the pods waiting for
their claims' volumes. The API side of claims and snapshots is csi.py. A part of Controller
(controller.py), sharing its state.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable

from backend.cluster import InvalidResource, NotFound
from backend.local import podspec, volumes
from backend.local.registry.status import ApiError
from backend.local.layout import Layout
from backend.local.runner import Runner
from backend.models import PersistentVolumeClaim, VolumeSnapshot

if TYPE_CHECKING:
    from backend.local.api import ClusterApi


class Storage:
    # The controller's state these methods use, made in Controller.__init__:
    layout: Layout
    api: ClusterApi
    runners: dict[str, Runner]
    claims: dict[str, PersistentVolumeClaim]
    snapshot_specs: dict[str, VolumeSnapshot]
    _volume_waiters: list[asyncio.Future]

    run_child: Callable[..., Awaitable[int]]  # kubelet.py

    def mount_dirs(self, plan: podspec.JobPlan) -> dict[str, str]:
        """Mount path → the directory backing it: a PVC's volume, or the files of a ConfigMap or
        Secret volume written for this job (as the kubelet projects them)."""
        dirs = {mount: str(self.layout.volume_dir(claim)) for claim, mount in plan.mounts}
        resolve = self.api.resolver(getattr(plan, "namespace", "default"))
        for kind, name, mount in getattr(plan, "projected", []):
            data = resolve(kind, name)
            if data is None:
                raise InvalidResource(f"volume at {mount}: {kind.lower()} {name!r} not found "
                                      "(CreateContainerConfigError)")
            directory = self.layout.root / "projected" / plan.name / f"{kind.lower()}-{name}"
            volumes.project(directory, data)
            dirs[mount] = str(directory)
        return dirs

    def claim_applied(self, claim: PersistentVolumeClaim) -> None:
        self.layout.volume_dir(claim.metadata.name).mkdir(parents=True, exist_ok=True)
        self.claims[claim.metadata.name] = claim
        self.volume_changed()

    def volume_changed(self) -> None:
        """A claim got its volume (or will not get it for now): the pods waiting look again."""
        waiters, self._volume_waiters = self._volume_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    async def wait_for_volumes(self, namespace: str, claims: list[str], waiting: Callable[[str], None]) -> None:
        """Return once every claim has its volume; until then `waiting(why)`, in the words of
        kube-scheduler's VolumeBinding plugin, which keeps such a pod Pending (a restore is
        being copied, its snapshot is not there yet, the claim does not exist)."""
        kind = self.api.kinds["PersistentVolumeClaim"]
        while missing := [c for c in claims if c not in self.claims]:
            unknown = [c for c in missing if self.api.store.find(kind, namespace, c) is None]
            why = f'persistentvolumeclaim "{unknown[0]}" not found' if unknown else \
                "pod has unbound immediate PersistentVolumeClaims"
            waiting(f"0/1 nodes are available: {why}. preemption: 0/1 nodes are available: "
                    "1 Preemption is not helpful for scheduling.")
            future = asyncio.get_running_loop().create_future()
            self._volume_waiters.append(future)
            await future

    async def fill_volume(self, name: str, source: Path) -> None:
        """The new volume `name` as a copy of `source` (a snapshot's data, another volume: its
        claim's dataSource). The copy is a child process (volumes.copy_command), so gigabytes
        never hold up this loop, into a temp directory renamed into place: the volume appears
        whole or not at all. InvalidResource in one line when the copy fails."""
        directory = self.layout.volume_dir(name)
        tmp = directory.with_name(f".{name}.tmp-{os.getpid()}")
        errors = tmp.with_name(f"{tmp.name}.err")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            tmp.mkdir(parents=True)
            code = await self.run_child(volumes.copy_command(source, tmp), output=errors)
            if code != 0:
                last = (errors.read_text(errors="replace").strip().splitlines() or [f"cp exited with {code}"])[-1]
                raise InvalidResource(f"copying its data source failed: {last}")
            volumes.drop_in_flight(tmp)
            os.rename(tmp, directory)
        except OSError as exc:
            raise InvalidResource(f"copying its data source failed: {exc.strerror or exc}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            errors.unlink(missing_ok=True)

    def take_snapshot(self, spec: VolumeSnapshot) -> dict:
        name, claim = spec.metadata.name, spec.spec.source.persistent_volume_claim_name
        if claim not in self.claims:
            raise NotFound(f"volume {claim!r} not found (apply its PersistentVolumeClaim first, "
                           "e.g. kubectl apply -f manifests/volume.yaml)")
        if self.layout.snapshot_dir(name).exists():
            raise InvalidResource(f"snapshot {name!r} already exists (delete it first: "
                                  f"kubectl delete volumesnapshot {name})")
        snap = volumes.create_snapshot(self.layout.volume_dir(claim), claim, self.layout.snapshot_dir(name))
        self.snapshot_specs[name] = spec
        return snap.model_dump(mode="json")

    def delete_claim(self, name: str) -> None:
        users = [r.name for r in self.runners.values()
                 if not r.summary.phase.finished and name in r.summary.volumes]
        if users:
            raise ApiError(409, "Conflict", f"persistentvolumeclaim {name!r} is in use by running job(s) "
                                            f"{', '.join(users)}; delete those first")
        shutil.rmtree(self.layout.volume_dir(name), ignore_errors=True)
        self.claims.pop(name, None)
        self.volume_changed()

    def delete_snapshot(self, name: str) -> None:
        self.snapshot_specs.pop(name, None)
        shutil.rmtree(self.layout.snapshot_dir(name), ignore_errors=True)
