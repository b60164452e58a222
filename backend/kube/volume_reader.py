"""What a checkpoint volume holds, printed as one JSON line: run inside the reader pod.

    python -m backend.kube.volume_reader /data
    python -m backend.kube.volume_reader /data --records RUN

The cockpit's checkpoint browser on Kubernetes starts a short-lived pod that mounts the volume
read-only and runs this (the lesson's "visible from a separate pod"). It walks the volume and
reports every checkpoint file (step, world size, loss, checksum verdict), every run's
metrics.json, and the number and size of files. With --records RUN it prints instead what the
workers of the run in directory RUN recorded there (training/run_record.py): every group's lines,
also those whose pods are gone. Standard library and training's torch-free
formats only: the pod needs no torch import to answer.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from training import checkpoint_format, metrics, run_record

# The line that carries the result, so stray output (a warning) cannot be mistaken for it.
MARKER = "kfcockpit-volume "
_SKIPPED_DIRS = {"lost+found"}


def scan(root: Path) -> dict:
    checkpoints: list[dict] = []
    runs: list[dict] = []
    files = size = 0
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        here = Path(directory)
        run = here.relative_to(root).as_posix()
        run = "" if run == "." else run
        for name in names:
            try:
                size += (here / name).stat().st_size
                files += 1
            except OSError:
                continue  # removed while we looked (a checkpoint being pruned)
        for path in checkpoint_format.list_files(here):
            info = checkpoint_format.inspect(path)
            checkpoints.append({
                "path": path.relative_to(root).as_posix(), "run": run, "step": info.step,
                "world_size": info.world_size, "loss": info.loss, "size_bytes": info.size_bytes,
                "created": info.created, "valid": info.valid, "problem": info.problem,
            })
        found = metrics.read(here)
        if found is not None:
            try:
                written = (here / metrics.FILE_NAME).stat().st_mtime
            except OSError:
                written = None
            runs.append(dict(found, run=run, written=written))
    return {"files": files, "size_bytes": size, "checkpoints": checkpoints, "metrics": runs}


def records(root: Path, run: str) -> dict:
    """(time, line) pairs the run in directory `run` recorded, or the runs directly under it (a
    Ray Train storage whose run names were chosen at random), in time order; none for a path that
    leaves the volume."""
    run_dir = (root / run).resolve()
    if not run_dir.is_relative_to(root.resolve()) or not run_dir.is_dir():
        return {"records": []}
    found = list(run_record.read(run_dir))
    for sub in sorted(p for p in run_dir.iterdir() if p.is_dir() and p.name != run_record.DIRECTORY):
        found += run_record.read(sub)
    return {"records": sorted(found, key=lambda pair: pair[0])}


def parse_output(text: str) -> dict:
    """The result from the reader pod's log; ValueError when the log holds none."""
    for line in reversed(text.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    raise ValueError("no result line in the reader's output")


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--records"):
        sys.stderr.write("usage: python -m backend.kube.volume_reader DIRECTORY [--records RUN]\n")
        return 2
    root = Path(argv[0])
    if not root.is_dir():
        sys.stderr.write(f"volume_reader: {root} is not a directory\n")
        return 2
    result = records(root, argv[2]) if len(argv) == 3 else scan(root)
    sys.stdout.write(MARKER + json.dumps(result, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
