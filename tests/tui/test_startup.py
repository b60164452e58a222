"""The UI process imports no torch, ray, kfp or kubernetes before its first paint, and no torch,
ray or kfp even after it has connected to the embedded cluster and shown the lesson (each step
imports what it needs when it runs; the connection is the `kubernetes` client, loaded in a thread
after the first frame). Checked in a fresh interpreter, so nothing else in the test session can
hide an import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import asyncio, json, sys
from pathlib import Path
from tui.cli import build_parser
from tui.app import CockpitApp
from tui.cli.app_cmds import launch_from_args

HEAVY = ("torch", "ray", "kfp", "kubernetes")

def loaded():
    return sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)

args = build_parser().parse_args(["--home", sys.argv[1]])
app = CockpitApp(launch_from_args(args))
report = {"built": loaded()}

# The screen mounts its panels after its first refresh: whatever compose, on_mount and the
# first frame imported is in sys.modules by then.
from tui.screens.cockpit import CockpitScreen
mount_panels = CockpitScreen._mount_panels
async def probed(self):
    report.setdefault("pydantic_before_paint", "pydantic" in sys.modules)
    report.setdefault("before_paint", loaded())
    return await mount_panels(self)
CockpitScreen._mount_panels = probed

async def main():
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        done = asyncio.Event()
        def check(_):
            if screen.job_bar.connection == "connected" and screen.checklist.steps:
                done.set()
        screen.changed.subscribe(screen, check, immediate=True)
        await asyncio.wait_for(done.wait(), 120)
        await pilot.press("n", "2", "3", "4", "5", "1")  # every tab drawn once
        report["connected"] = loaded()
        report["backend"] = "backend.kube.cluster" in sys.modules
    # after the app has stopped: its watches would start a new controller
    from backend.local.embedded import Embedded
    await Embedded(Path(sys.argv[1])).down()

asyncio.run(main())
print(json.dumps(report))
"""


def test_the_cockpit_starts_and_connects_without_heavy_imports(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "home")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["backend"], "the probe did not reach the connected state it means to check"
    assert report["built"] == []
    assert report["pydantic_before_paint"] is False  # the first frame waits for no pydantic
    assert report["before_paint"] == []
    assert {m.split(".")[0] for m in report["connected"]} == {"kubernetes"}  # the one client, no torch/ray/kfp
