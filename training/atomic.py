"""The one atomic file write: readers see the old content or the new, never a mix. No torch.

Every file the cockpit, the embedded cluster or a worker replaces in place goes through here
(training/ is the lowest layer, so backend and tui can use it too).
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, data: bytes | str, durable: bool = True, mode: int | None = None) -> None:
    """Write a temp file beside `path`, fsync it (unless `durable` is False: state that is
    rebuilt anyway after a crash), rename it over `path`. `mode`: the file's permissions from
    its first byte (0o600: never readable by others, not even between a write and a chmod). A
    write that fails (a full disk) leaves no temporary file behind to keep the disk full."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)  # a temp file left by a crash may have had another mode
        with open(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
