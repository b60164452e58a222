"""A checkpoint's checksum is read once by whoever verifies it again (`Checksums`, held by the
checkpoint store that walks its directory), and that memory is bounded: the least recently
verified files are forgotten first, so a long-lived verifier does not grow with every file it
ever saw (issue 46: no unbounded process-wide cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from training import checkpoint_format as fmt


def committed(directory: Path, step: int) -> Path:
    path = directory / fmt.file_name(step)
    path.write_bytes(bytes([step]) * 4096)
    fmt.write_sidecar(path, {"bytes": 4096, "crc32": fmt.file_checksum(path), "step": step})
    return path


def torn_in_place(path: Path) -> None:
    """A flipped byte the file's identity (size, mtime) does not show: only a read sees it."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_verifier_remembers_at_most_its_limit_the_least_recently_verified_forgotten(tmp_path):
    checksums = fmt.Checksums(limit=2)
    paths = [committed(tmp_path, step) for step in (1, 2, 3)]
    for path in paths:
        fmt.verify_file(path, checksums=checksums)
    assert len(checksums) == 2
    for path in paths:
        torn_in_place(path)
    assert fmt.verify_file(paths[2], checksums=checksums)["step"] == 3  # remembered: not read again
    with pytest.raises(fmt.InvalidCheckpoint, match="checksum"):
        fmt.verify_file(paths[0], checksums=checksums)  # forgotten: read, and the tear found


def test_without_a_holder_every_verify_reads_the_file(tmp_path):
    path = committed(tmp_path, 1)
    fmt.verify_file(path)
    torn_in_place(path)
    with pytest.raises(fmt.InvalidCheckpoint, match="checksum"):
        fmt.verify_file(path)
