"""What every part of the cockpit screen shares: the screen it works for, its workers, and the
guarded backend call.

A part is one responsibility of the cockpit screen (following a job, driving the lesson, storage,
pod actions) with the state that belongs to it. It is no widget: what it changes is spread over
widgets in different places of the layout (the checklist and the step card on the left, the
panels, the job bar on top), and the screen, which routes every message, calls it. Its workers run
on the screen (`run_worker`), so worker groups, exclusivity and the one worker-error handler are
the screen's, as if the methods were still its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, Coroutine, Protocol

from backend.errors import USER_ERRORS, one_line

if TYPE_CHECKING:
    from textual.app import App
    from textual.message import Message
    from textual.signal import Signal
    from textual.timer import Timer
    from textual.worker import Worker

    from backend.models import JobSummary
    from tui.model.session import Session
    from tui.screens.panels import Panels
    from tui.widgets.checklist import Checklist
    from tui.widgets.checkpoints import CheckpointsPanel
    from tui.widgets.job_bar import JobBar
    from tui.widgets.log_view import LogView
    from tui.widgets.loss_chart import LossChart
    from tui.widgets.pods_table import PodsTable
    from tui.widgets.step_view import StepView
    from tui.widgets.timeline_view import TimelineView


class Host(Protocol):
    """What a part may use of the screen it works for: the session, the widgets it draws on, the
    screen's workers, timers and signal, and `post_message` to ask another part for something
    (tui/screens/cockpit/messages.py). Never another part, never the screen's class."""

    session: "Session"
    clock: Callable[[], float]
    changed: "Signal[str]"

    @property
    def app(self) -> "App": ...
    @property
    def checklist(self) -> "Checklist": ...
    @property
    def step_view(self) -> "StepView": ...
    @property
    def pods_table(self) -> "PodsTable": ...
    @property
    def log_view(self) -> "LogView": ...
    @property
    def ckpt_panel(self) -> "CheckpointsPanel": ...
    @property
    def loss_chart(self) -> "LossChart": ...
    @property
    def job_bar(self) -> "JobBar": ...
    @property
    def timeline(self) -> "TimelineView": ...
    @property
    def panels(self) -> "Panels": ...

    def followed_job(self) -> "tuple[str | None, JobSummary | None]": ...
    def post_message(self, message: "Message") -> bool: ...
    def run_worker(self, work, *, group: str, exclusive: bool, exit_on_error: bool) -> "Worker": ...
    def notify(self, message: str, **kwargs) -> None: ...
    def set_timer(self, delay: float, callback: Callable[[], object]) -> "Timer": ...


class Part:
    def __init__(self, screen: Host) -> None:
        self.screen = screen

    def run(self, work: Coroutine | Callable[[], Coroutine], group: str, exclusive: bool = False) -> "Worker":
        """A worker on the screen: every error reaches its `on_worker_state_changed`."""
        return self.screen.run_worker(work, group=group, exclusive=exclusive, exit_on_error=False)

    def notify(self, message: str, **kwargs) -> None:
        self.screen.notify(message, **kwargs)

    def job_to_show(self, missing: str) -> str | None:
        """The followed job, once the cluster answers; else None, and `missing` tells the learner."""
        job = self.screen.followed_job()[0]
        if job is None or self.screen.session.cluster is None:
            self.notify(missing, severity="warning")
            return None
        return job

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
