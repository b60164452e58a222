"""A container run's log on its node (backend/local/node/shim.py: LogFile, which a run's shim
and the node's PodLog write with): what the disk refuses.

A full disk drops a container's lines rather than stopping the node (the container runs on, as
containerd's CRI log writer drops what it cannot write); nothing half-written is read as a line,
and the next write that holds says how many lines were lost and why."""

from __future__ import annotations

import errno

from backend.local.node.logs import read_lines
from backend.local.node.shim import LogFile


class FullOnce:
    """The log file, refusing `refused` writes as a full disk does, after writing part of one."""

    def __init__(self, file, refused: int) -> None:
        self.file, self.refused = file, refused

    def write(self, data: bytes) -> int:
        if self.refused:
            self.refused -= 1
            self.file.write(data[:7])  # part of it reached the disk before it filled
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)


def test_lines_the_full_disk_refused_are_counted_and_said_once_space_is_back(tmp_path):
    warned = []
    log = LogFile(tmp_path / "0.log", warned.append)
    log.write([b"step=1"])
    log.file = FullOnce(log.file, refused=2)
    log.write([b"step=2", b"step=3"])
    log.write([b"step=4"])
    assert [text for _, text, _ in read_lines(log.path, 0, log.path.stat().st_size)] == ["step=1"]
    log.write([b"step=5"])
    texts = [text for _, text, _ in read_lines(log.path, 0, log.path.stat().st_size)]
    assert texts == ["step=1", "kfcockpit: 3 lines of this log lost: No space left on device", "step=5"]
    assert log.size == log.path.stat().st_size
    log.write([b"step=6"])
    assert read_lines(log.path, 0, log.path.stat().st_size)[-1][1] == "step=6"
    assert len(warned) == 1  # said once, not per refused write
    log.close()
