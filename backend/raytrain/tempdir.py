"""Where Ray keeps its temp files for a state root: `<home>/ray/`, shared by every Ray run of it.

Ray names its sockets `<temp dir>/session_<date>_<time>_<usec>_<pid>/sockets/...` and a Unix
socket path holds at most 107 bytes, so the state root must be short (training.ray_train checks
the same bound). Sessions of finished runs are pruned to the newest few when a run starts.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from backend.cluster import InvalidResource
from training.ray_train import MAX_TEMP_DIR

_SESSION_PID = re.compile(r"^session_.*_(\d+)$")
_KEEP_SESSIONS = 3


def ray_temp_dir(home: Path) -> Path:
    """`<home>/ray`, or InvalidResource in one line when it is too long for Ray's socket paths."""
    path = Path(home).expanduser().absolute() / "ray"
    if len(str(path)) > MAX_TEMP_DIR:
        raise InvalidResource(
            f"the state root {home} is too long for Ray's socket paths ({len(str(path))} > "
            f"{MAX_TEMP_DIR} characters with '/ray'); use a shorter --home or KFCOCKPIT_HOME")
    return path


def prune_sessions(temp_dir: Path) -> None:
    """Remove the session directories of finished runs beyond the newest few. A session is named
    after the pid of the driver that started it; a live driver's session is never touched."""
    finished = []
    for session in temp_dir.glob("session_*"):
        match = _SESSION_PID.match(session.name)
        if not match or session.is_symlink():
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue  # the driver still runs
        except ProcessLookupError:
            finished.append(session)
        except PermissionError:
            continue
    for session in sorted(finished, key=lambda p: p.stat().st_mtime)[:-_KEEP_SESSIONS]:
        shutil.rmtree(session, ignore_errors=True)
