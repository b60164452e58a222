"""Following a job live: the job list, which job is followed, and the three watches (jobs, the
followed job's pods, its merged logs) whose items go to the widgets that show them, and the
connection state those watches reveal (the job bar's connected / disconnected).

The followed job's goodput (fed to the failure timeline's model with the rest) is shown in the
job bar and the timeline at most `GOODPUT_SECONDS` apart: its time parts grow while the job runs
even when no line arrives.

Every watch runs through `live.keep_open` in a worker of its own group, exclusive: following
another job cancels the old job's pod and log watches (and the pods' usage sampling, the one
reading that cannot be watched, `live.sample`). Each pod event and log batch is handed,
once, to every model fed from it (pods table, logs, loss chart, failure timeline); none of them
asks the cluster again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator

from backend.errors import NotFound, one_line
from tui.screens.cockpit.part import Part
from tui.live import keep_open, sample

if TYPE_CHECKING:
    from backend.models import JobSummary, LogLine, Pod, PodEvent

GOODPUT_SECONDS = 0.5


class Following(Part):
    def __init__(self, screen) -> None:
        super().__init__(screen)
        self.jobs: dict[str, "JobSummary"] = {}
        self.followed: str | None = None
        self.followed_by_user = False

    # ------------------------------------------------------------------ connection

    def connected(self) -> None:
        bar = self.screen.job_bar
        if bar.connection != "connected":
            was_lost = bar.connection != "connecting"
            bar.connection = "connected"
            if was_lost:
                self.notify("connected to the cluster again", title="cluster")
            self.changed("connection")

    def lost(self, reason: str, delay: float) -> None:
        bar = self.screen.job_bar
        if bar.connection in ("connected", "connecting"):
            self.notify(f"{reason}; retrying", title="cluster unreachable", severity="warning")
        bar.connection = f"retry in {delay:.0f}s · {reason}"
        self.changed("connection")

    # ------------------------------------------------------------------ jobs

    def watch_jobs(self):
        return self.run(self._watch_jobs(), group="jobs", exclusive=True)

    async def _watch_jobs(self) -> None:
        cluster = self.screen.session.cluster

        async def jobs() -> AsyncIterator["JobSummary"]:
            listed = await cluster.list_jobs()
            self.connected()
            for job in listed:
                self.jobs[job.name] = job
            self._choose_job()
            async for job in cluster.watch_jobs():
                yield job

        await keep_open(jobs, self._job_changed, self.lost)

    def _job_changed(self, job: "JobSummary") -> None:
        self.connected()
        before = self.jobs.get(job.name)
        self.jobs[job.name] = job
        if job.name == self.followed:
            self.screen.job_bar.job = job
            self.screen.timeline.model.job_seen(job)
            if job.phase.finished and (before is None or not before.phase.finished):
                self.screen.storage.refresh()
        elif before is None:
            self._choose_job()
        self.changed("jobs")

    def _choose_job(self) -> None:
        """Follow the newest unfinished job (else the newest), unless the learner chose one."""
        if self.followed_by_user or not self.jobs:
            return
        newest = sorted(self.jobs.values(), key=lambda j: j.created, reverse=True)
        best = next((j for j in newest if not j.phase.finished), newest[0])
        current = self.jobs.get(self.followed) if self.followed else None
        if current is None or (best.created > current.created):
            self.follow(best.name)

    def follow(self, job: str, by_user: bool = False) -> None:
        self.followed_by_user = by_user
        if job == self.followed:
            return
        screen = self.screen
        self.followed = job
        screen.job_bar.followed = job
        screen.job_bar.job = self.jobs.get(job)
        screen.job_bar.show_progress(None, None, now=True)
        screen.panels.follow(job)
        if job in self.jobs:
            screen.timeline.model.job_seen(self.jobs[job])
        self.watch_pods(job)
        self.sample_usage(job)
        self.stream_logs(job)
        self.changed("follow")

    def pick(self) -> None:
        """The learner chooses the job to follow (j)."""
        if not self.jobs:
            self.notify("no jobs yet: run a training step", severity="warning")
            return
        from tui.screens.pick_job import PickJobScreen

        def chosen(name: str | None) -> None:
            if name:
                self.follow(name, by_user=True)

        self.screen.app.push_screen(PickJobScreen(list(self.jobs.values()), self.followed), chosen)

    # ------------------------------------------------------------------ the followed job's pods

    def watch_pods(self, job: str):
        return self.run(self._watch_pods(job), group="pods", exclusive=True)

    async def _watch_pods(self, job: str) -> None:
        cluster = self.screen.session.cluster
        try:
            await keep_open(lambda: cluster.watch_pods(job), self.pod_changed, self.lost,
                            on_reopen=lambda: self.screen.pods_table.reset(job, keep_history=True),
                            gives_up=_job_gone)
        except NotFound as exc:
            self.notify(one_line(exc), title=f"stopped following {job}", severity="warning")

    def pod_changed(self, event: "PodEvent") -> None:
        self.connected()
        if event.pod.job != self.followed:
            return
        screen = self.screen
        table = screen.pods_table
        before = table.pods.get(event.pod.name)
        latest = table.latest_attempt
        table.apply(event)
        screen.timeline.model.pod_event(event, screen.clock())
        pod = event.pod
        self._mark_in_logs(event, before, latest)
        if pod.last_step is not None and pod.restart_attempt >= table.latest_attempt:
            screen.job_bar.show_progress(pod.last_step, pod.last_loss)
            if before is None or before.last_step != pod.last_step:
                screen.storage.checkpoints_changed_soon()
        self.changed("pods")

    def sample_usage(self, job: str):
        return self.run(self._sample_usage(job), group="usage", exclusive=True)

    async def _sample_usage(self, job: str) -> None:
        """The pods' CPU and memory (metrics.k8s.io is read, not watched) while the table shows."""
        from tui.widgets.pods_table import USAGE_SECONDS

        table = self.screen.pods_table
        await sample(lambda: self.screen.session.cluster.pod_usage(job), table.show_usage,
                     every=USAGE_SECONDS, wanted=lambda: table.wants_usage)

    def _mark_in_logs(self, event: "PodEvent", before: "Pod | None", latest: int) -> None:
        """A separator in the merged logs where a worker failed and where a new group started:
        the lines either side belong to different attempts."""
        from tui import format as fmt

        pod = event.pod
        log_view = self.screen.log_view
        failed = pod.phase.value == "Failed" or (event.type.value == "DELETED" and pod.phase.value != "Succeeded")
        was_failed = before is not None and before.phase.value == "Failed"
        if failed and not was_failed and before is not None:
            why = pod.reason or ("deleted" if event.type.value == "DELETED" else "failed")
            code = f", exit {pod.exit_code}" if pod.exit_code is not None else ""
            log_view.mark(f"✘ pod {fmt.short_name(pod.name, pod.job)} (rank {fmt.rank_label(pod.rank)}, attempt "
                          f"{pod.restart_attempt}) {why}{code}")
        elif event.type.value != "DELETED" and pod.restart_attempt > latest and before is None:
            log_view.mark(f"↻ restart attempt {pod.restart_attempt}: a new group starts")

    # ------------------------------------------------------------------ the followed job's logs

    def stream_logs(self, job: str):
        return self.run(self._stream_logs(job), group="logs", exclusive=True)

    async def _stream_logs(self, job: str) -> None:
        cluster = self.screen.session.cluster

        async def finished() -> bool:
            summary = await cluster.get_job(job)
            return summary.phase.finished

        try:
            await keep_open(lambda: cluster.stream_logs(job, follow=True), self.log_batch, self.lost,
                            on_reopen=lambda: self._lines_resent(job), done=finished,
                            gives_up=_job_gone)
        except NotFound as exc:
            self.notify(one_line(exc), title=f"stopped the logs of {job}", severity="warning")

    def _lines_resent(self, job: str) -> None:
        self.screen.log_view.reset(job)
        self.screen.timeline.model.lines_resent()

    def log_batch(self, batch: list["LogLine"]) -> None:
        screen = self.screen
        screen.log_view.ingest(batch)
        screen.loss_chart.add_lines(batch)
        screen.timeline.model.add_lines(batch)
        self.changed("logs")

    def show_goodput(self) -> None:
        """The followed job's goodput so far, to the job bar and the timeline (on a timer)."""
        screen = self.screen
        report = screen.timeline.model.goodput_report(screen.clock())
        if report != screen.job_bar.goodput:
            screen.job_bar.show_goodput(report)
            screen.timeline.show_goodput(report)
            self.changed("goodput")


def _job_gone(exc: BaseException) -> bool:
    """NotFound: the job was deleted; watching it again cannot help."""
    return isinstance(exc, NotFound)
