"""`metrics.json`: what a finished run leaves beside its checkpoints. No torch."""

from __future__ import annotations

import json
from pathlib import Path

from training.atomic import write_atomic

FILE_NAME = "metrics.json"


def write_json(path: Path, data: dict) -> None:
    """`data` as indented JSON, written atomically (readers see the old file or the new one)."""
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read(directory: Path) -> dict | None:
    """The metrics of the run that wrote into `directory`, or None if it has not finished."""
    try:
        return json.loads((directory / FILE_NAME).read_text())
    except (OSError, ValueError):
        return None
