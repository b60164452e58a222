from __future__ import annotations

from pathlib import Path

from backend.recording.regenerate import RECORDINGS
from tests.local.conftest import cluster, home  # noqa: F401  (fixtures: the embedded cluster)
from tests.recording.replayed import KILL_AND_RESUME
NODE_FAILURE = RECORDINGS / "node-failure.kfrec.gz"
SHIPPED = (KILL_AND_RESUME, NODE_FAILURE)


def cut(path: Path, into: Path, keep: float = 0.5) -> Path:
    """The first part of a recording's bytes: a file copied or written only partly."""
    data = path.read_bytes()
    into.write_bytes(data[: int(len(data) * keep)])
    return into
