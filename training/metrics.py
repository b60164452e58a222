"""`metrics.json`: what a finished run leaves beside its checkpoints. No torch."""

from __future__ import annotations

import json
import os
from pathlib import Path

FILE_NAME = "metrics.json"


def write_atomic(path: Path, data: dict) -> None:
    """Write JSON to a temp file, fsync, rename: readers see the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read(directory: Path) -> dict | None:
    """The metrics of the run that wrote into `directory`, or None if it has not finished."""
    try:
        return json.loads((directory / FILE_NAME).read_text())
    except (OSError, ValueError):
        return None
