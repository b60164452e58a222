"""Snapshots are hard-linked trees with their runs' metrics; checkpoints are read from the files."""

from __future__ import annotations

import json
import os

import pytest

from backend.cluster import InvalidResource, NotFound
from backend.models import JobPhase
from backend.local.embedded import Embedded
from tests.local.conftest import WAIT, apply_all, cli, lesson_job, lesson_resources
from training import checkpoint_format


async def test_a_snapshot_links_the_volume_and_lists_with_its_metrics(cluster, home):
    await apply_all(cluster, *lesson_resources())
    await cluster.apply(lesson_job(steps=12, step_delay=0.0))
    assert (await cluster.wait_job("lesson-ddp", frozenset({JobPhase.COMPLETE}), WAIT)).phase == JobPhase.COMPLETE

    snap = await cluster.snapshot("checkpoints", "after-run")
    assert snap.volume == "checkpoints" and snap.ready
    ((metrics),) = snap.metrics
    assert (metrics.run, metrics.steps, metrics.world_size) == ("lesson-ddp", 12, 2)
    listed = {s.name: s for s in await cluster.snapshots()}
    assert listed["after-run"].metrics == snap.metrics and listed["after-run"].files == snap.files

    volume_run = Embedded(home).layout.claim_dir("default", "checkpoints") / "lesson-ddp"
    snapshot_run = Embedded(home).layout.snapshot_data("default", "after-run") / "lesson-ddp"
    newest = checkpoint_format.list_files(volume_run)[-1]
    assert os.stat(newest).st_ino == os.stat(snapshot_run / newest.name).st_ino  # a link, not a copy

    newest.unlink()  # the volume changes; the snapshot keeps what it had
    checkpoint_format.verify_file(snapshot_run / newest.name)
    read_back = await cluster.read_metrics(snapshot="after-run")  # the whole metrics.json, loss history too
    assert [m.model_copy(update={"loss_history": []}) for m in read_back] == snap.metrics
    assert len(read_back[0].loss_history) == 12

    with pytest.raises(InvalidResource):
        await cluster.snapshot("checkpoints", "after-run")
    with pytest.raises(NotFound):
        await cluster.snapshot("no-such-volume", "other")

    shown = cli(home, "snapshot", "list", "-o", "json")
    assert shown.returncode == 0
    (entry,) = json.loads(shown.stdout)
    assert entry["name"] == "after-run" and entry["metrics"][0]["steps"] == 12
