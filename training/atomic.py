"""The one atomic file write: readers see the old content or the new, never a mix. No torch.

Every file the cockpit, the embedded cluster or a worker replaces in place goes through here
(training/ is the lowest layer, so backend and tui can use it too).
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, data: bytes | str, durable: bool = True) -> None:
    """Write a temp file beside `path`, fsync it (unless `durable` is False: state that is
    rebuilt anyway after a crash), rename it over `path`. A write that fails (a full disk) leaves
    no temporary file behind to keep the disk full."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
