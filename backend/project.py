"""Where the project's own files are: its root (the pods' working directory, so `-m training.ddp`
resolves, and the pipelines' image context) and the lesson's manifests as they ship."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = PROJECT_ROOT / "manifests"
