"""What the cockpit looks like, at 80x24 (SSH: tabs), 120x40 and 200x50 (one screen), dark and light.

The content is deterministic because of what the state root holds, not because anything is
faked: lesson progress written by the engine's own store at fixed times, checkpoint files in the
real format with fixed headers on a volume applied to the real embedded cluster, and the app's
clock fixed to a moment after them. Update after an intended change with --snapshot-update.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
import time
from pathlib import Path

import pytest

from backend.lesson.jobs import apply_runtime_and_volume
from backend.lesson.progress import ProgressStore, StepState, StepStatus
from backend.connect import connect
from backend.local.embedded import Embedded
from backend.local.layout import Layout
from backend.models import Evidence
from backend.settings import Settings
from tests.tui.conftest import connected, wait_until
from training import checkpoint_format, metrics
from tui.app import CockpitApp
from tui.config import CockpitConfig
from tui.launch import Launch

NOW = 1_800_000_000.0  # the app's clock: every age on screen is relative to this


def evidence(ok: bool, checked: str, seen: str, ago: float, details=()) -> Evidence:
    return Evidence(ok=ok, checked=checked, seen=seen, details=list(details), at=NOW - ago)


def prepare(home: Path) -> None:
    settings = Settings(home=home)
    store = ProgressStore(settings.workspace)
    store.save_note("setup-1", "Standalone Trainer and Kubeflow Pipelines on kind, with kubectl apply.")
    store.put("setup-1", StepState(status=StepStatus.DONE, updated=NOW - 3600, evidence=evidence(
        True, "your note covers install method, Kubeflow Trainer, Kubeflow Pipelines",
        "all three are there", 3600)))
    store.put("setup-2", StepState(status=StepStatus.DONE, updated=NOW - 1800, evidence=evidence(
        True, "the controller answers", "local controller running", 1800)))
    store.put("setup-3", StepState(status=StepStatus.FAILED, updated=NOW - 90, evidence=evidence(
        False, "the Pipelines SDK imports and the endpoint answers",
        "no Pipelines endpoint is reachable", 90, ["kfp 2.17.3 imports", "GET /apis/v2beta1/healthz: refused"])))
    store.put("3", StepState(status=StepStatus.DONE, updated=NOW - 60, evidence=evidence(
        True, "every rank printed the same loss at every step", "rank 0 and rank 1 agree at all 40 steps", 60)))

    cluster = connect(Settings(home=home))

    async def apply() -> None:
        await apply_runtime_and_volume(cluster)
        await cluster.wait_volume("checkpoints", 60)  # its provisioner binds it
        await cluster.close()

    asyncio.run(apply())
    run_dir = Layout(home).claim_dir("default", "checkpoints") / "lesson-ddp"
    run_dir.mkdir(parents=True)
    for i, step in enumerate((5, 10, 15)):
        header = {"step": step, "world_size": 2, "loss": round(0.5 / step, 6), "created": NOW - 300 + i * 30}
        checkpoint_format.write_checkpoint(run_dir, header, bytes(range(256)) * (40 + step))
    broken = checkpoint_format.write_checkpoint(
        run_dir, {"step": 20, "world_size": 2, "loss": 0.02, "created": NOW - 200}, b"x" * 4096)
    broken.write_bytes(b"x" * 3096)  # a torn write
    metrics.write_json(run_dir / metrics.FILE_NAME, {
        "final_loss": 0.033333, "steps": 15, "world_size": 2, "wall_seconds": 12.5, "resumes": 0,
        "launcher": "torchrun", "loss_history": [round(0.5 / (s + 1), 6) for s in range(15)]})


@pytest.fixture(scope="module")
def prepared_home(tmp_path_factory):
    """One state root and cluster for the module: every snapshot only reads them (the theme comes
    in the app's config, never saved), and each would otherwise pay a cluster's start for a frame."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "UTC")  # evidence shows clock times: the same on every machine
        time.tzset()
        home = tmp_path_factory.mktemp("snapshots") / "home"
        prepare(home)
        try:
            yield home
        finally:
            asyncio.run(Embedded(home).down())
    time.tzset()


def cockpit(home: Path, theme: str = "dark") -> CockpitApp:
    app = CockpitApp(Launch.of(Settings(home=home), CockpitConfig(theme=theme)), clock=lambda: NOW)
    app.animation_level = "none"
    return app


async def ready(pilot) -> None:
    """Connected, and the volume, its checkpoints and its runs' metrics shown: on the one client
    path they come from a reader pod, after the lesson, and they are all in the picture."""
    screen = pilot.app.screen
    await connected(screen)
    await wait_until(screen, lambda: screen.ckpt_panel.volume == "checkpoints", "the volume list")
    await pilot.app.workers.wait_for_complete(
        [w for w in pilot.app.workers if w.group in ("storage", "volume")])
    await pilot.pause()


async def checkpoints_tab(pilot) -> None:
    await ready(pilot)
    screen = pilot.app.screen
    await pilot.press("4")
    await wait_until(screen, lambda: len(screen.ckpt_panel.query_one("#ckpt-table").keys) == 4,
                     "the checkpoint files")


SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=["80x24", "120x40", "200x50"])


@SIZES
def test_the_lesson_and_the_failed_step(prepared_home, snap_compare, size):
    assert snap_compare(cockpit(prepared_home), terminal_size=size, run_before=ready)


@SIZES
def test_checkpoints_with_a_torn_file(prepared_home, snap_compare, size):
    assert snap_compare(cockpit(prepared_home), terminal_size=size, run_before=checkpoints_tab)


def test_light_theme_at_80x24(prepared_home, snap_compare):
    assert snap_compare(cockpit(prepared_home, theme="light"), terminal_size=(80, 24), run_before=ready)


def test_a_zoomed_panel_at_120x40(prepared_home, snap_compare):
    async def zoomed(pilot) -> None:
        await ready(pilot)
        await pilot.press("2", "z")  # the pods panel has the keys, then fills the screen

    assert snap_compare(cockpit(prepared_home), terminal_size=(120, 40), run_before=zoomed)


def test_help_at_80x24(prepared_home, snap_compare):
    assert snap_compare(cockpit(prepared_home), terminal_size=(80, 24), run_before=ready,
                        press=["question_mark"])


def test_the_prepared_state_is_what_the_backend_reports(prepared_home):
    """Guards the snapshots: the files above read back as real checkpoints, one of them torn."""
    cluster = connect(Settings(home=prepared_home))
    found = asyncio.run(cluster.checkpoints("checkpoints"))
    asyncio.run(cluster.close())
    assert sorted((c.step, c.valid) for c in found) == [(5, True), (10, True), (15, True), (20, False)]
    progress = json.loads((prepared_home / "workspace" / "local" / "progress.json").read_text())
    assert progress["steps"]["3"]["status"] == "done"


def test_the_pods_tab_at_80x24(prepared_home, snap_compare):
    """Every column the pods table keeps at this width fits whole (CPU and MEM included); the
    ones that do not fit are dropped, not cut."""
    async def pods_tab(pilot) -> None:
        await ready(pilot)
        await pilot.press("2")

    assert snap_compare(cockpit(prepared_home), terminal_size=(80, 24), run_before=pods_tab)


def test_every_saved_snapshot_is_one_a_test_here_makes():
    """syrupy fails a run that leaves a snapshot unused, but not under pytest-xdist (`make test`
    runs two workers): the same check, from this module's tests and their parameter ids."""
    made = set()
    for name, test in inspect.getmembers(sys.modules[__name__], inspect.isfunction):
        if name.startswith("test_") and "snap_compare" in inspect.signature(test).parameters:
            marks = [mark for mark in getattr(test, "pytestmark", []) if mark.name == "parametrize"]
            ids = [i for mark in marks for i in mark.kwargs["ids"]]
            made |= {f"{name}[{i}].svg" for i in ids} if ids else {f"{name}.svg"}
    saved = {p.name for p in (Path(__file__).parent / "__snapshots__" / Path(__file__).stem).iterdir()}
    assert saved == made
