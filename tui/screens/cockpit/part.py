"""What every part of the cockpit screen shares: the screen it works for, its workers, and the
guarded backend call.

A part is one responsibility of the cockpit screen (following a job, driving the lesson, storage,
pod actions) with the state that belongs to it. It is no widget: what it changes is spread over
widgets in different places of the layout (the checklist on the left, the step card in the
panels, the job bar on top), and the screen, which routes every message, calls it. Its workers run
on the screen (`run_worker`), so worker groups, exclusivity and the one worker-error handler are
the screen's, as if the methods were still its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, Coroutine

from backend.errors import USER_ERRORS, one_line

if TYPE_CHECKING:
    from textual.worker import Worker

    from tui.screens.cockpit import CockpitScreen


class Part:
    def __init__(self, screen: "CockpitScreen") -> None:
        self.screen = screen

    def run(self, work: Coroutine | Callable[[], Coroutine], group: str, exclusive: bool = False) -> "Worker":
        """A worker on the screen: every error reaches its `on_worker_state_changed`."""
        return self.screen.run_worker(work, group=group, exclusive=exclusive, exit_on_error=False)

    def notify(self, message: str, **kwargs) -> None:
        self.screen.notify(message, **kwargs)

    def changed(self, what: str) -> None:
        self.screen.changed.publish(what)

    async def call(self, what: str, awaitable: Awaitable, ok: bool = False):
        """Await a backend call; a user error becomes a notification and None."""
        try:
            result = await awaitable
        except USER_ERRORS as exc:
            self.notify(one_line(exc), title=f"could not {what}", severity="error")
            return None
        return True if ok and result is None else result
