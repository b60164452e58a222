"""The one save a rank makes before it leaves: the newest complete step, so a restarted group
loses none of it.

Whichever comes first starts it:
- a peer's process gone (`watch_peers`: training/peer_watch.py sees its connection end): a thread
  of its own saves at once, and the rank then leaves as after a failed collective (PeerLost);
- a stop (SIGTERM: the platform tearing the group down, or a stopped job). With `watch`, a thread
  of its own saves at once, while the training thread is still in the step the stop interrupted,
  instead of at that step's end or at its failed all-reduce: at 1 GB a step lasts 1.2-1.6 s and a
  restart waits for this save (the dead peer's core is free for it meanwhile);
- a failed collective, on the training thread, where `run` catches PeerFailure.

Once stopped, the step in flight stops too (`abandon_step_on` with `check`): it is checked before
each layer's forward and as each gradient is computed, and until it gets there (one layer's
matrix product at 1 GB is a third of a second) the training thread runs at the lowest priority,
so it does not compete with the save and the platform's restart for the cores.

The state saved is one whole step's: the optimizer update runs inside `update()`, which the save
excludes, and once the save is made no update follows (StopRequested: the step in flight is
abandoned, as the checkpoint says it is at the step before). Nothing the step computes before its
update (activations, gradients, DDP's buckets) is part of the state.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from torch import nn


class StopRequested(Exception):
    """SIGTERM arrived (a group teardown or a stopped job): the rank saved and trains no further."""


class PeerLost(StopRequested):
    """A peer's process is gone (its peer-watch connection ended): the rank saved and trains no
    further; it leaves as after a failed collective."""


PEER_LOST = "peer_failure"  # the checkpoint's reason: the same as a failed collective's save


class ExitSave:
    def __init__(self, save: Callable[[str], None], leaving: bool = False):
        """`leaving`: the process leaves after a watch's save (never true in-process), so the
        training thread, which builds this, may drop to the lowest priority once stopped."""
        self._save = save  # save(reason): the store's survivor save of the current state
        self._leaving = leaving
        self._updating = threading.Lock()  # held by the update, and by the save for its whole length
        self.done = False  # a save before exit was made (or tried): no update may follow
        self._closed = False
        self._stops: list[tuple[threading.Event, type[StopRequested]]] = []  # watched: the step in flight ends
        self._training_thread = threading.get_native_id()  # made by the loop, on its thread

    @contextmanager
    def update(self) -> Iterator[None]:
        """Around the optimizer update and the step counter: never while a save reads the state."""
        with self._updating:
            if self.done:
                self.check()
                raise StopRequested("stopped: the step in flight was abandoned for the save before exit")
            yield

    def check(self) -> None:
        """Raise (PeerLost, or StopRequested) once a watched event is set: the step in flight is
        abandoned."""
        for event, error in self._stops:
            if event.is_set():
                raise error("the step in flight was abandoned for the save before exit")

    def save(self, reason: str) -> None:
        """Save the newest complete step, once per process whoever asks (a second caller waits
        for the first's save to finish, so neither leaves before the file is committed)."""
        with self._updating:
            if self.done:
                return
            try:
                self._save(reason)
            finally:
                self.done = True

    def watch(self, stop: threading.Event, then: Callable[[], None]) -> threading.Thread:
        """On `stop`, save at once on a thread of its own, then call `then` (which ends the
        process: the teardown waits for it). Nothing happens if the loop has ended first (`close`)."""
        return self._watch(stop, StopRequested, "sigterm", then, "exit-save")

    def watch_peers(self, lost: threading.Event, then: Callable[[], None]) -> threading.Thread:
        """On `lost` (a peer's process is gone), save at once on a thread of its own, then call
        `then` (which ends the process, as a failed collective would; the training thread,
        meanwhile, raises PeerLost at its next check). Nothing happens if the loop has ended
        first (`close`)."""
        return self._watch(lost, PeerLost, PEER_LOST, then, "exit-save-peers")

    def _watch(self, event: threading.Event, error: type[StopRequested], reason: str,
               then: Callable[[], None], name: str) -> threading.Thread:
        self._stops.append((event, error))

        def save_when_set() -> None:
            event.wait()
            if self._closed:
                return
            try:
                self._stop_and_save(reason)
            except BaseException:  # noqa: BLE001 - printed; the process still leaves
                traceback.print_exc(file=sys.stderr)
            finally:
                then()

        thread = threading.Thread(target=save_when_set, name=name, daemon=True)
        thread.start()
        return thread

    def _stop_and_save(self, reason: str) -> None:
        if self._leaving:
            try:  # the step in flight is abandoned: let the save and the restart have the cores
                os.setpriority(os.PRIO_PROCESS, self._training_thread, 19)
            except OSError:
                pass
        self.save(reason)

    def close(self) -> None:
        """The loop has ended: a stop from here on is the caller's to handle."""
        self._closed = True


def abandon_step_on(check: Callable[[], None], module: "nn.Module") -> None:
    """Make the step in flight end (`check` raises, out of forward or backward): called before
    each child module's forward and as each parameter's gradient is computed. Only for a process
    that leaves after its save: DDP's reducer is left mid-step."""
    for child in module.children():
        child.register_forward_pre_hook(lambda *_: check())
    for parameter in module.parameters():
        parameter.register_hook(lambda grad: (check(), grad)[1])
