"""The one atomic file write: readers see the old content or the new, never a mix. No torch.

Every file the cockpit, the embedded cluster or a worker replaces in place goes through here
(training/ is the lowest layer, so backend and tui can use it too).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_tag: tuple[int, str] | None = None


def process_tag() -> str:
    """This process's mark in the name of a temp file it writes beside others': its pid and a
    random part. A pid alone is not unique on a shared volume: each pod has a PID namespace of its
    own, where its worker is PID 2, and another machine's pods write there too. Two pods starting
    at once both probed `.write-probe-2`, and one's unlink took the other's file. Made again after
    a fork (warm workers are a zygote's forks)."""
    global _tag
    pid = os.getpid()
    if _tag is None or _tag[0] != pid:
        _tag = (pid, f"{pid}-{secrets.token_hex(4)}")
    return _tag[1]


def fsync_path(path: Path) -> None:
    """fsync a file by name; nothing to do if it is gone (pruned meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes | str, durable: bool = True, mode: int | None = None) -> None:
    """Write a temp file beside `path`, fsync it (unless `durable` is False: state that is
    rebuilt anyway after a crash), rename it over `path`. `mode`: the file's permissions from
    its first byte (0o600: never readable by others, not even between a write and a chmod). A
    write that fails (a full disk) leaves no temporary file behind to keep the disk full."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{process_tag()}")
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
