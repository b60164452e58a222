"""The attempt ledger in the failure timeline's zoom: read (backend/ledger, the same rows as
`kfcockpit goodput --attempts`) when the timeline is zoomed and again on `r`, from the platform's
pods and Events and the lines the cockpit already holds (the timeline model's goodput), so the
workers' logs are not read a second time; and an attempt's logs, read when the learner chooses
it: each of its pods' log, and the previous container's where one restarted in place (`kubectl
logs -p`), all through the Cluster protocol, so the same on a real cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.errors import USER_ERRORS, one_line
from tui.screens.cockpit.part import Part

if TYPE_CHECKING:
    from backend.ledger.rows import AttemptRow
    from tui.screens.attempt_logs import PodLogs
    from tui.widgets.attempt_ledger import AttemptLedger


class AttemptsView(Part):
    def __init__(self, screen) -> None:
        super().__init__(screen)
        self.zoomed = False  # the timeline is zoomed: the ledger is shown and kept read

    @property
    def widget(self) -> "AttemptLedger":
        return self.screen.timeline.query_one("#attempt-ledger")

    def zoom_changed(self, zoomed: bool) -> None:
        """The timeline was zoomed (the ledger is read and shown) or put back (hidden)."""
        if zoomed == self.zoomed:
            return
        self.zoomed = zoomed
        widget = self.widget
        if not zoomed and widget.query_one("#ledger-attempts").has_focus:
            self.screen.timeline.focus()  # the keys stay in the timeline
        widget.display = zoomed
        if zoomed:
            self.refresh()

    def refresh(self) -> None:
        if not self.zoomed:
            return
        job = self.job_to_show("no job followed yet: its attempts come with it (j picks one)")
        if job is not None:
            self.run(self._read(job), group="ledger", exclusive=True)

    async def _read(self, job: str) -> None:
        from backend.ledger.read import read_ledger

        lines = self.screen.timeline.model.goodput  # the lines the cockpit read, not read again
        ledger = await self.call(f"read the attempts of {job}", read_ledger(self.screen.session.cluster, job, lines))
        if ledger is None or job != self.screen.followed_job()[0]:
            return
        self.widget.show(ledger)
        if self.zoomed:
            self.widget.query_one("#ledger-attempts").focus()
        self.changed("ledger")

    def choose(self, row: "AttemptRow") -> None:
        job = self.screen.followed_job()[0]
        if job is not None and self.screen.session.cluster is not None:
            self.run(self._show_logs(job, row), group="attempt-logs", exclusive=True)

    async def _show_logs(self, job: str, row: "AttemptRow") -> None:
        from tui.screens.attempt_logs import AttemptLogsScreen

        listed = await self.call(f"list the pods of {job}", self.screen.session.cluster.list_pods(job))
        if listed is None:
            return
        pods = {pod.name: pod for pod in listed}
        logs = [await self._pod_logs(name, pods.get(name)) for name in row.pods]
        await self.screen.app.push_screen(AttemptLogsScreen(job, row, logs))
        self.changed("attempt-logs")

    async def _pod_logs(self, name: str, pod) -> "PodLogs":
        """A pod's log and, where its container restarted in place, the run before; a pod gone, or
        a log that cannot be read, says why in its place (the other pods' logs still show)."""
        from backend.ledger.rows import rank_of_name
        from tui.screens.attempt_logs import PodLogs

        cluster = self.screen.session.cluster
        if pod is None:
            return PodLogs(name, rank_of_name(name), missing="the pod was deleted, and its log with it; "
                           "its lines stay in the run record on the job's volume (kfcockpit goodput)")
        try:
            previous = await cluster.pod_log(name, previous=True) if pod.restarts else None
            return PodLogs(name, pod.rank, await cluster.pod_log(name), previous)
        except USER_ERRORS as exc:
            return PodLogs(name, pod.rank, missing=one_line(exc))
