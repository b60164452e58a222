"""Measured comparisons as JSON in the workspace, so the lesson can pre-fill step 10's note."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import ValidationError

from backend.compare.figures import Comparison
from backend.settings import Settings
from training import metrics as json_files  # atomic JSON writes, torch-free

FOLDER = "comparisons"


def comparisons_dir(settings: Settings) -> Path:
    return settings.workspace / FOLDER


def save_comparison(settings: Settings, comparison: Comparison) -> Path:
    folder = comparisons_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(comparison.measured_at))
    path = folder / f"comparison-{stamp}.json"
    json_files.write_json(path, comparison.model_dump(mode="json"))
    return path


def latest_comparison(settings: Settings) -> Comparison | None:
    """The newest saved comparison that still reads, or None when nothing was measured yet."""
    for path in sorted(comparisons_dir(settings).glob("comparison-*.json"), reverse=True):
        try:
            return Comparison.model_validate_json(path.read_text())
        except (OSError, ValidationError):
            continue  # a file from an older format or cut short: try the one before
    return None
