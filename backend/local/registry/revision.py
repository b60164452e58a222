"""The embedded API server's revision: the resourceVersion counter, persisted as etcd's revision is.

Kubernetes clients rely on two things: a version is never handed out twice (a watch resumed from
it would skip or repeat events), and a restarted server answers 410 Gone for history it no longer
has. So the counter survives restarts and owes nothing to the wall clock, which can step back.

Persisting every increment would cost an fsync per write, on the event loop. Instead a block of
versions is reserved ahead: the file holds a high-water mark, written (fsynced) before any version
under it is handed out, and a restarted server starts above the mark. A crash anywhere, even
between the reservation and the writes it covers, leaves a mark at or above every version handed
out; the versions reserved and not used are skipped (gaps, which clients never rely on: a
resourceVersion is opaque). One fsync per BLOCK writes; a restart skips at most BLOCK versions.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from training.atomic import write_atomic

log = logging.getLogger("kfcockpit.registry")

BLOCK = 1000  # versions reserved per fsync


class Revision:
    """The newest version handed out (`current`) and the next one (`next()`). Without a path (a
    store kept in memory only) nothing is persisted and the counter starts at 1, as an empty
    etcd's revision does: to a client, version "0" means "any", never a point in history."""

    def __init__(self, path: Path | None, block: int = BLOCK):
        self.path = path
        self.block = block
        self.current = self._recorded()
        self.reserved = self.current  # nothing reserved by this server yet

    def _recorded(self) -> int:
        """The mark an earlier server left: every version it handed out is at or below it."""
        if self.path is None:
            return 1
        try:
            return int(self.path.read_text())
        except FileNotFoundError:
            pass  # a new state root, or one from before the mark
        except (OSError, ValueError) as exc:
            log.error("unreadable revision mark %s (%s): starting above the wall clock", self.path, exc)
        # What versions were before the mark: the wall clock in milliseconds at start. A root
        # written then stays above every version its server handed out (as long as the clock did
        # not step back meanwhile); a new root merely starts high. Only ever read here, once.
        return int(time.time() * 1000)

    def advance_past(self, version: int) -> None:
        """A version found in storage (a stored object's): the counter continues above it."""
        self.current = max(self.current, version)

    def next(self) -> int:
        if self.current >= self.reserved:
            self._reserve(self.current + self.block)
        self.current += 1
        return self.current

    def _reserve(self, mark: int) -> None:
        if self.path is not None:
            write_atomic(self.path, f"{mark}\n")
            # the rename itself must be on disk before a version under the new mark goes out
            directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        self.reserved = mark
