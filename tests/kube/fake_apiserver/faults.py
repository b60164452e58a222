"""Faults a test injects into the fake's streams, and the waits that let it inject them at the
exact moment: every open stream dropped mid-way, watches gone silent, history compacted (a watch
from an older version gets 410 Gone), bookmarks, an unhealthy Pipelines endpoint.

The streams (streams.py) read these fields under the store's lock; each change notifies it.
"""

from __future__ import annotations

from typing import Callable

from tests.kube.fake_apiserver.served import PODS
from tests.kube.fake_apiserver.store import Store


class Faults(Store):
    def __init__(self) -> None:
        super().__init__()
        self.compacted = 0  # a watch from a version below this is Gone
        self.gone_as_http_status = False  # 410 as the HTTP status instead of an ERROR event
        self.generation = 0  # drop_streams() bumps it: open streams break mid-way
        self.silenced = 0  # silence_watches() sets it to the generation: those watches stop talking
        self.bookmarks = 0  # bookmark() bumps it: each watch that allows bookmarks sends one
        self.bookmarks_sent = 0
        self.streaming: list[tuple[tuple[str, str], int]] = []  # open watch streams: (key, generation)
        self.healthz_ok = True  # the Pipelines API's healthz, for the preflight test

    def drop_streams(self, then: Callable[[], None] | None = None) -> None:
        """Break every open watch and log stream mid-way (no final chunk). `then` runs under
        the same lock, so a client reconnecting sees its changes, never the state between."""
        with self.cond:
            self.generation += 1
            if then:
                then()
            self.cond.notify_all()

    def silence_watches(self) -> None:
        """Open watch streams stay open and say nothing more (a half-dead connection)."""
        with self.cond:
            self.generation += 1
            self.silenced = self.generation
            self.cond.notify_all()

    def compact(self) -> None:
        """Forget history: a watch from any version older than the current one gets 410 Gone."""
        with self.cond:  # re-entrant: the version read and set under one hold
            self.compact_before(self.rv)

    def compact_before(self, version: int) -> None:
        """Forget history older than `version`: watches from an earlier version get 410 Gone."""
        with self.cond:
            self.compacted = version
            self.cond.notify_all()

    def bookmark(self) -> None:
        with self.cond:
            self.bookmarks += 1
            self.cond.notify_all()

    def wait_watching(self, key: tuple[str, str] = PODS, count: int = 1, timeout: float = 30.0) -> None:
        """Block until `count` watch streams of `key` opened since the last drop/silence are open."""
        with self.cond:
            if not self.cond.wait_for(lambda: sum(1 for k, g in self.streaming
                                                  if k == key and g == self.generation) >= count, timeout):
                raise AssertionError(f"no open watch of {key[1]} after {timeout}s")

    def wait_bookmarks_sent(self, count: int, timeout: float = 30.0) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.bookmarks_sent >= count, timeout):
                raise AssertionError(f"fewer than {count} bookmarks sent after {timeout}s")
