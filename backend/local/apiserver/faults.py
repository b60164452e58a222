"""What a test breaks in the API server's streams, in-process: every open watch and log stream
dropped mid-way, watches gone silent, log follows ended before their last lines, a bookmark now,
410 Gone as the HTTP status. Compaction is the store's own (`Store.compact`, etcd's).

Off unless a test turns it on: the server holds one `Faults` (`ApiServer.faults`) that nobody
calls in normal use; the streams only register with it (a set add and discard) and ask it before
each write. Nothing on the network reaches it; a test in the server's process calls its methods
on the server's loop. `changed` is called after each change a test may wait for (a stream opened,
a bookmark sent), so a test thread waits on a signal, not a sleep.

Upstream clients must survive each of these (client-go's reflector: a watch that ends or breaks is
resumed from its last resourceVersion, a silent one times out, 410 Gone re-lists), which is what
the kube backend's tests check through the real `kubernetes` client.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Callable


BOOKMARK_NOW = object()  # put in a watch's queue: send a BOOKMARK at once


@dataclass(eq=False)
class OpenStream:
    """One watch or log follow being served: what the faults do to it."""

    kind: str  # the watched kind ("Pod"), or "log"
    name: str  # a log's "namespace/pod"; "" for a watch
    transport: asyncio.BaseTransport | None
    queue: asyncio.Queue | None = None  # a watch that allows BOOKMARK events: its event queue
    stop: Callable[[], None] = lambda: None  # ends the handler (a watch's close)
    silent: bool = False  # says nothing more, and stays open
    ending: bool = False  # a log follow that ends cleanly before its next chunk


class Faults:
    def __init__(self) -> None:
        self.gone_as_http_status = False  # 410 as the answer's status instead of the watch's ERROR event
        self.bookmarks_sent = 0  # by bookmark(): each watch allowing them sends one
        self.changed: Callable[[], None] = lambda: None
        self._open: set[OpenStream] = set()

    # ------------------------------------------------------------------ what a test does

    def drop_streams(self) -> None:
        """Break every open watch and log stream mid-way (no final chunk), as a broken network
        or a restarted server does; the silent ones stay as they are."""
        for stream in [s for s in self._open if not s.silent]:
            self._open.discard(stream)
            if stream.transport is not None:
                stream.transport.abort()
            stream.stop()
        self.changed()

    def silence_watches(self) -> None:
        """Open watches stay open and say nothing more, ever (a half-dead connection)."""
        for stream in self._open:
            if stream.kind != "log":
                stream.silent = True
        self.changed()

    def end_log_follows(self, namespace: str, pod: str) -> None:
        """The pod's open log follows end cleanly before they send anything more (a follow the
        server ended early: what the container prints next is in its log, not on this stream)."""
        for stream in self._open:
            if stream.kind == "log" and stream.name == f"{namespace}/{pod}":
                stream.ending = True

    def bookmark(self) -> None:
        """Each open watch that allows bookmarks sends one now."""
        for stream in self._open:
            if stream.queue is not None and not stream.silent:
                stream.queue.put_nowait(BOOKMARK_NOW)

    def watching(self) -> Counter[str]:
        """How many watches of each kind are open and talking (opened since the last drop)."""
        return Counter(s.kind for s in self._open if s.kind != "log" and not s.silent)

    # ------------------------------------------------------------------ the streams' side

    def opened(self, kind: str, name: str, transport: asyncio.BaseTransport | None,
               queue: asyncio.Queue | None = None, stop: Callable[[], None] = lambda: None) -> OpenStream:
        stream = OpenStream(kind, name, transport, queue, stop)
        self._open.add(stream)
        self.changed()
        return stream

    def closed(self, stream: OpenStream) -> None:
        self._open.discard(stream)
        self.changed()

    def bookmarked(self) -> None:
        self.bookmarks_sent += 1
        self.changed()
