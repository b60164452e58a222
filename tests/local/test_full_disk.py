"""A full disk in the middle of a run (issue 44): the embedded cluster's state root, the volume
its checkpoints go to included, on a 64 MiB tmpfs that fills while the lesson's job trains.

- A write the API server cannot commit is refused with the Status etcd's server gives when its
  space runs out (`etcdserver: mvcc: database space exceeded`, 500: etcd/server/etcdserver/
  errors.go ErrNoSpace as kube-apiserver passes it on) and is nowhere: not read, not listed.
- The workers' checkpoint save meets ENOSPC and the group fails, as any failed rank fails it; the
  JobSet's failure policy restarts it (v0.12 pkg/controllers/failure_policy.go), within the
  runtime's budget: no storm of pods while nothing can be written.
- Once space is freed the job completes, bitwise equal to an uninterrupted run's.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from backend.cluster import ClusterError, NotFound
from backend.local.embedded import Embedded
from backend.local.node.podspec import cluster_marker
from backend.models import JobPhase
from backend.processes import marked_processes, wait_gone_async
from tests.tmpfs import mounted_tmpfs
from tests.local.conftest import WAIT, apply_all, embedded_cluster, lesson_job, lesson_resources, run_until_step

COMPLETE = frozenset({JobPhase.COMPLETE})
STEPS = dict(steps=30, step_delay=0.05)
FULL_AT = 8  # the step after which the disk fills (checkpoints every 5: the next save meets it)


@pytest.fixture
def disk(tmp_path: Path):
    """A 64 MiB tmpfs."""
    with mounted_tmpfs(tmp_path / "disk", "64m") as mount:
        yield mount


def fill(path: Path) -> None:
    """Write zeros to `path` until the file system has no byte left."""
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(chunk[:size])
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc


def metrics(home: Path, run: str) -> dict:
    return json.loads((Embedded(home).layout.claim_dir("default", "checkpoints") / run / "metrics.json").read_text())


async def test_a_full_disk_refuses_writes_keeps_nothing_of_them_and_the_job_completes_bitwise_equal(disk):
    home = disk / "home"
    async with embedded_cluster(home) as cluster:
        await apply_all(cluster, *lesson_resources())
        await cluster.apply(lesson_job("calm", ckpt_dir="/checkpoints/calm", **STEPS))
        await cluster.wait_job("calm", COMPLETE, WAIT)
        await cluster.apply(lesson_job("full", ckpt_dir="/checkpoints/full", **STEPS))
        await run_until_step(cluster, "full", FULL_AT)
        status = await Embedded(home).status()
        own = {status["pid"], *(z["pid"] for z in status.get("warm", []))}
        workers = [pid for pid in marked_processes(cluster_marker(Embedded(home).layout.root)) if pid not in own]
        assert workers, "the job's processes"

        fill(disk / "filler")
        with pytest.raises(ClusterError, match="database space exceeded"):
            await cluster.apply(lesson_job("refused", ckpt_dir="/checkpoints/refused", **STEPS))
        with pytest.raises(NotFound):
            await cluster.get_job("refused")
        assert "refused" not in {job.name for job in await cluster.list_jobs()}
        # The group's next checkpoint save meets the full disk: its processes end.
        assert await wait_gone_async(workers, WAIT) == []

        (disk / "filler").unlink()
        job = await cluster.wait_job("full", COMPLETE, WAIT)
        assert 1 <= job.restart_attempt <= 3, job  # the runtime's maxRestarts: 3
        with pytest.raises(NotFound):
            await cluster.get_job("refused")
    calm, full = metrics(home, "calm"), metrics(home, "full")
    assert full["params_sha256"] == calm["params_sha256"]
    assert full["loss_history"] == calm["loss_history"]
