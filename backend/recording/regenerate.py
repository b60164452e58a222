"""Regenerate the recordings the project ships (manifests/recordings/), each made by
`kfcockpit record`'s Recorder on a fresh embedded cluster of its own, never written by hand
(in this process, so it records from the job's first line: a recorder started after a kill
would find the killed group's pods and logs gone):

- kill-and-resume: the lesson's step 6 on the default two-node cluster: the lesson's TrainJob
  (manifests/trainjob.yaml, fewer steps), rank 1's pod killed mid-training, the group restarted
  and resumed from its checkpoint.
- node-failure: the same job on `kfcockpit cluster up --nodes 3 --gpus-per-node 2`, rank 1's node
  failed (`kfcockpit node fail`): the group restarts on the nodes left.

  python -m backend.recording.regenerate [--only NAME] [--into DIR]

Minutes of CPU each (two real torch.distributed runs); the test suite only checks that the
shipped ones still load (tests/recording/test_shipped.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from backend.models import parse_manifests
from backend.project import MANIFESTS
from backend.recording.format import SUFFIX

RECORDINGS = MANIFESTS / "recordings"
JOB = "lesson-ddp"
STEPS = 40
STEP_DELAY = 0.2
FAULT_AT_STEP = 12
WAIT = 600.0


def lesson_job(steps: int = STEPS, step_delay: float = STEP_DELAY):
    """The lesson's TrainJob (manifests/trainjob.yaml), shorter."""
    (job,) = parse_manifests((MANIFESTS / "trainjob.yaml").read_text())
    data = job.to_manifest()
    args = data["spec"]["trainer"]["args"]
    for flag, value in (("--steps", steps), ("--step-delay", step_delay)):
        args[args.index(flag) + 1] = str(value)
    (changed,) = parse_manifests(yaml.safe_dump(data))
    return changed


def _done(home: Path, *args: str) -> None:
    """A `kfcockpit` command on `home` (the cluster's shape is the CLI's to set)."""
    done = subprocess.run([sys.executable, "-m", "tui", *args, "--home", str(home)], timeout=WAIT)
    if done.returncode != 0:
        raise SystemExit(f"kfcockpit {' '.join(args)} failed (exit {done.returncode})")


async def record_one(name: str, into: Path, fault: str, shape: tuple[str, ...] = ()) -> Path:
    """Apply the job, record it as `kfcockpit record` does, inject the fault at FAULT_AT_STEP."""
    from backend.connect import connect
    from backend.recording.recorder import Recorder
    from backend.settings import Settings

    out = into / f"{name}{SUFFIX}"
    with tempfile.TemporaryDirectory(prefix=f"kfrec-{name}-") as tmp:
        home = Path(tmp) / "home"
        _done(home, "cluster", "up", *shape)
        cluster = await asyncio.to_thread(connect, Settings(home=home))
        try:
            for manifest in ("runtime.yaml", "volume.yaml"):
                for resource in parse_manifests((MANIFESTS / manifest).read_text()):
                    await cluster.apply(resource)
            await cluster.apply(lesson_job())
            recording = asyncio.ensure_future(Recorder(cluster, JOB, out).run())
            async for batch in cluster.stream_logs(JOB):
                if any(line.step is not None and line.step >= FAULT_AT_STEP for line in batch):
                    break
            victim = next(p for p in await cluster.list_pods(JOB) if p.rank == 1)
            if fault == "kill":
                await cluster.kill_pod(victim.name)
                print(f"{name}: killed {victim.name}")
            else:
                print(f"{name}: {await cluster.capabilities.fail_node(victim.node)}")
            print((await asyncio.wait_for(recording, WAIT)).one_line())
        finally:
            await cluster.close()
            _done(home, "cluster", "down")
    return out


SCENARIOS = {
    "kill-and-resume": dict(fault="kill"),
    "node-failure": dict(fault="node", shape=("--nodes", "3", "--gpus-per-node", "2")),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.recording.regenerate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--into", type=Path, default=RECORDINGS)
    args = parser.parse_args(argv)
    args.into.mkdir(parents=True, exist_ok=True)
    os.environ.pop("KUBECONFIG", None)  # the embedded cluster's own, never the user's
    for name in args.only or sorted(SCENARIOS):
        print(f"wrote {asyncio.run(record_one(name, args.into, **SCENARIOS[name]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
