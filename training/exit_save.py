"""The one save a rank makes before it leaves: the newest complete step, so a restarted group
loses none of it.

Whichever comes first starts it:
- a failed collective (a peer died), on the training thread, where `run` catches PeerFailure;
- a stop (SIGTERM: the platform tearing the group down, or a stopped job). With `watch`, a thread
  of its own saves at once, while the training thread is still in the step the stop interrupted,
  instead of at that step's end or at its failed all-reduce: at 1 GB a step lasts 1.6 s and a
  restart waits for this save (the dead peer's core is free for it meanwhile).

Once stopped, the step in flight stops too (`abandon_step_on`): it is checked before each layer's
forward and as each gradient is computed, so the training thread no longer competes with the save
for the cores (with gloo a dead peer is only noticed when the backward pass ends).

The state saved is one whole step's: the optimizer update runs inside `update()`, which the save
excludes, and once the save is made no update follows (StopRequested: the step in flight is
abandoned, as the checkpoint says it is at the step before). Nothing the step computes before its
update (activations, gradients, DDP's buckets) is part of the state.
"""

from __future__ import annotations

import sys
import threading
import traceback
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from torch import nn


class StopRequested(Exception):
    """SIGTERM arrived (a group teardown or a stopped job): the rank saved and trains no further."""


class ExitSave:
    def __init__(self, save: Callable[[str], None]):
        self._save = save  # save(reason): the store's survivor save of the current state
        self._updating = threading.Lock()  # held by the update, and by the save for its whole length
        self.done = False  # a save before exit was made (or tried): no update may follow
        self._closed = False

    @contextmanager
    def update(self) -> Iterator[None]:
        """Around the optimizer update and the step counter: never while a save reads the state."""
        with self._updating:
            if self.done:
                raise StopRequested("stopped: the step in flight was abandoned for the save before exit")
            yield

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

        def save_when_stopped() -> None:
            stop.wait()
            if self._closed:
                return
            try:
                self.save("sigterm")
            except BaseException:  # noqa: BLE001 - printed; the process still leaves as asked
                traceback.print_exc(file=sys.stderr)
            finally:
                then()

        thread = threading.Thread(target=save_when_stopped, name="exit-save", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """The loop has ended: a stop from here on is the caller's to handle."""
        self._closed = True


def abandon_step_on(stop: threading.Event, module: "nn.Module") -> None:
    """Make the step in flight end (StopRequested, out of forward or backward) once `stop` is set:
    checked before each child module's forward and as each parameter's gradient is computed. Only
    for a process that leaves after its save: DDP's reducer is left mid-step."""

    def check(*_) -> None:
        if stop.is_set():
            raise StopRequested("stopped mid-step: the step in flight is abandoned")

    for child in module.children():
        child.register_forward_pre_hook(check)
    for parameter in module.parameters():
        parameter.register_hook(lambda grad: (check(), grad)[1])
