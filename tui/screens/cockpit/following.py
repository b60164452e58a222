"""Following a job live: the job list, which job is followed, and the three watches (jobs, the
followed job's pods, its merged logs) whose items go to the widgets that show them, and the
connection state those watches reveal (the job bar's connected / disconnected).

The followed job's goodput (fed to the failure timeline's model with the rest) is shown in the
job bar and the timeline at most `GOODPUT_SECONDS` apart: its time parts grow while the job runs
even when no line arrives. Whether its group hangs (the same model's hang detector), and which
rank is a straggler, is asked every `HANG_SECONDS`, for the pods panel and the job bar.

The logs read are those of the ranks the pods panel shows (its `RanksShown`: every rank of a small
group, rank 0 and the telling ones of a large group), through the stream's `LogFocus`; every pod's
state comes from the one pod watch. Each rank's step comes from its lines, to the pods table and
the job bar.

Every watch runs through `live.keep_open` in a worker of its own group, exclusive: following
another job cancels the old job's pod and log watches (and the pods' usage sampling, the one
reading that cannot be watched, `live.sample`). Each pod event and log batch is handed,
once, to every model fed from it (pods table, logs, loss chart, failure timeline); none of them
asks the cluster again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator

from backend.errors import NotFound, one_line
from tui.screens.cockpit.messages import AttemptsChanged, CheckpointsChanged
from tui.screens.cockpit.part import Part
from tui.model.live import keep_open, sample

if TYPE_CHECKING:
    from backend.models import JobSummary, LogFocus, LogLine, Pod, PodEvent

GOODPUT_SECONDS = 0.5
HANG_SECONDS = 1.0


class Following(Part):
    def __init__(self, screen, wanted: str | None = None) -> None:
        super().__init__(screen)
        self.jobs: dict[str, "JobSummary"] = {}
        self.followed: str | None = None
        self.followed_by_user = False
        self.wanted = wanted  # the job the command line named (--follow), until it is listed
        self.focus: "LogFocus | None" = None  # whose logs the followed job's stream reads
        self._marked: dict[int, int] = {}  # restart attempt -> its failed pods marked in the logs
        self._asked: tuple[str, int] | None = None  # (job, step) of the hang whose ranks were read
        self._uid: str | None = None  # the followed job's JobSet uid, from its first pod
        self._others: set[str] = set()  # pods of the name's earlier job: not shown with it
        self._follows = 0  # follows so far: a history read for an earlier one is not this one's

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
            if self.wanted is not None and self.wanted not in self.jobs:
                self.notify(f"no job named {self.wanted} here yet: it is followed once it appears", title="--follow",
                            severity="warning")
            self._choose_job()
            async for job in cluster.watch_jobs():
                yield job

        await keep_open(jobs, self._job_changed, self.lost)

    def _job_changed(self, job: "JobSummary") -> None:
        self.connected()
        before = self.jobs.get(job.name)
        self.jobs[job.name] = job
        if job.name == self.followed and before is not None and not job.same_job(before):
            # Deleted and applied again: another job of the same name, whose pods and logs the
            # old job's watches (ended with it) would never show.
            self.followed = None
            self.screen.loss_chart.forget(job.name)
            self.follow(job.name, by_user=self.followed_by_user)
        if job.name == self.followed:
            self.screen.job_bar.job = job
            self.screen.timeline.model.job_seen(job)
            if job.phase.finished and (before is None or not before.phase.finished):
                self.screen.post_message(CheckpointsChanged(soon=False))
            if before is not None and (job.restart_attempt, job.phase) != (before.restart_attempt, before.phase):
                self.screen.post_message(AttemptsChanged())  # an attempt ended: the ledger shown says why
        elif before is None:
            self._choose_job()
        self.changed("jobs")

    def _choose_job(self) -> None:
        """Follow the newest unfinished job (else the newest), unless the learner chose one: on
        the command line (--follow, followed as soon as it is listed) or with j."""
        if self.wanted is not None and self.wanted in self.jobs:
            wanted, self.wanted = self.wanted, None
            self.follow(wanted, by_user=True)
            return
        if self.followed_by_user or not self.jobs:
            return
        newest = sorted(self.jobs.values(), key=lambda j: j.created, reverse=True)
        best = next((j for j in newest if not j.phase.finished), newest[0])
        current = self.jobs.get(self.followed) if self.followed else None
        if current is None or (best.created > current.created):
            self.follow(best.name)

    def follow(self, job: str, by_user: bool = False) -> None:
        if by_user:
            self.wanted = None  # the learner's choice (j) outranks the command line's
        self.followed_by_user = by_user
        if job == self.followed:
            return
        screen = self.screen
        self.followed = job
        screen.job_bar.followed = job
        screen.job_bar.job = self.jobs.get(job)
        screen.job_bar.total_steps = None
        screen.job_bar.show_progress(None, None, now=True)
        self.focus = _first_focus(self.jobs.get(job))
        self._marked = {}
        self._uid, self._others = None, set()
        self._follows += 1
        screen.panels.follow(job)
        screen.post_message(AttemptsChanged())  # the ledger shown is the followed job's
        summary = self.jobs.get(job)
        if summary is not None:
            screen.timeline.model.job_seen(summary)
            if summary.restart_attempt > 0:  # groups before this one: their pods and lines are gone
                screen.timeline.model.history_expected()
                self.run(self._read_history(job, self._follows), group="history", exclusive=True)
        self.watch_pods(job)
        self.sample_usage(job)
        self.stream_logs(job)
        self.changed("follow")

    async def _read_history(self, job: str, follow: int) -> None:
        """What the platform and the job's volume keep of it (what `kfcockpit goodput` measures),
        folded into the timeline's model: its restarts and goodput from every group it had."""
        from backend.goodput.job import job_history

        model = self.screen.timeline.model
        history = None
        try:
            history = await self.call(f"read the history of {job}", job_history(self.screen.session.cluster, job))
        finally:
            if follow == self._follows:  # else followed again since: that follow reads its own
                model.history_read(history)
                self.show_goodput()
                self.screen.post_message(AttemptsChanged())  # the earlier groups' first steps are known now
                self.changed("history")

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
        if event.pod.job != self.followed or not self._is_followed(event.pod):
            return
        screen = self.screen
        table = screen.pods_table
        before = table.pods.get(event.pod.name)
        latest = table.latest_attempt
        table.apply(event)
        screen.timeline.model.pod_event(event, screen.clock())
        self._mark_in_logs(event, before, latest)
        self.changed("pods")

    def _is_followed(self, pod: "Pod") -> bool:
        """A job is its uid: pods of a job deleted and applied again under the same name (still
        Terminating, say) are another job's. The followed one's JobSet uid is its summary's, else
        that of its first pod made since the job was."""
        if not pod.job_uid:
            return True  # no JobSet made it (a RayJob's pods on KubeRay): its name tells
        if self._uid is None:
            job = self.jobs.get(pod.job)
            if job is None:
                return True  # not listed yet (a step named it first): nothing tells them apart yet
            if job.group_uid:  # its JobSet is known: its pods are the ones it made
                self._uid = job.group_uid
            elif pod.created < job.created:  # (whole seconds: an old pod of the same second passes)
                self._others.add(pod.name)
                return False
            else:
                self._uid = pod.job_uid
        if pod.job_uid != self._uid:
            self._others.add(pod.name)
            return False
        return True

    def sample_usage(self, job: str):
        return self.run(self._sample_usage(job), group="usage", exclusive=True)

    async def _sample_usage(self, job: str) -> None:
        """The pods' CPU and memory (metrics.k8s.io is read, not watched) while the table shows:
        of the ranks with a row, when the group is summarised."""
        from tui.widgets.pods_table import USAGE_SECONDS

        table = self.screen.pods_table
        await sample(lambda: self.screen.session.cluster.pod_usage(job, ranks=table.usage_ranks), table.show_usage,
                     every=USAGE_SECONDS, wanted=lambda: table.wants_usage)

    def _mark_in_logs(self, event: "PodEvent", before: "Pod | None", latest: int) -> None:
        """A separator in the merged logs where a worker failed and where a new group started:
        the lines either side belong to different attempts. Of a large group's restart, the
        first pods to fail (the failure, the first torn down), not the hundreds after them."""
        from tui.model import format as fmt
        from tui.widgets.pods_table import HISTORY_PER_ATTEMPT

        pod = event.pod
        log_view = self.screen.log_view
        failed = pod.phase.value == "Failed" or (event.type.value == "DELETED" and pod.phase.value != "Succeeded")
        was_failed = before is not None and before.phase.value == "Failed"
        if failed and not was_failed and before is not None:
            marked = self._marked[pod.restart_attempt] = self._marked.get(pod.restart_attempt, 0) + 1
            if marked > HISTORY_PER_ATTEMPT:
                return
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

        focus = self.focus
        try:
            await keep_open(lambda: cluster.stream_logs(job, follow=True, focus=focus), self.log_batch, self.lost,
                            on_reopen=lambda: self._lines_resent(job), done=finished,
                            gives_up=_job_gone)
        except NotFound as exc:
            self.notify(one_line(exc), title=f"stopped the logs of {job}", severity="warning")

    def _lines_resent(self, job: str) -> None:
        self.screen.log_view.reset(job)
        self.screen.timeline.model.lines_resent()

    def focus_on(self, ranks: tuple[int, ...], grouped: bool) -> None:
        """The ranks the pods panel shows: their logs are read (rank 0's always: it speaks for
        the group, to the goodput and the failure timeline). A panel with a row per pod only
        adds ranks: while its pods arrive one by one, a rank let go would be read again from
        its last lines, not its first."""
        if self.focus is None or not ranks:
            return
        self.focus.want((0, *ranks) if grouped else (0, *self.focus.ranks, *ranks))

    def log_batch(self, batch: list["LogLine"]) -> None:
        job = self.jobs.get(self.followed) if self.followed else None
        if self._others or (job is not None and batch and batch[0].time < job.created - 1.0):
            # An earlier job of the name: its pods' lines (printed before this job was made, a
            # second's slack for the API's whole seconds) are not this job's.
            since = job.created - 1.0 if job is not None else 0.0
            batch = [line for line in batch if line.pod not in self._others and line.time >= since]
            if not batch:
                return
        screen = self.screen
        screen.log_view.ingest(batch)
        screen.loss_chart.add_lines(batch)
        screen.timeline.model.add_lines(batch)
        table = screen.pods_table
        table.progress(batch)
        screen.job_bar.total_steps = screen.timeline.model.total_steps  # progress and the time left
        for line in reversed(batch):  # the newest group's newest step, to the job bar
            if line.step is not None:
                pod = table.pods.get(line.pod)
                if pod is None or pod.restart_attempt >= table.latest_attempt:
                    screen.job_bar.show_progress(line.step, line.loss)
                    screen.post_message(CheckpointsChanged(soon=True))
                    if screen.job_bar.hang is not None or screen.job_bar.silence:
                        self.show_hang()  # the group steps again: HUNG goes with its first step line
                    break
        self.changed("logs")

    def show_hang(self) -> None:
        """Whether the followed job's newest group hangs, to the pods panel (on a timer). When the
        ranks whose logs are read all wait, the one that stopped is among the others: their last
        lines are read, once for each hang, and tell which (its row and its log follow)."""
        screen = self.screen
        hang = screen.timeline.model.hang(screen.clock())
        silence = screen.timeline.model.silence() if hang is None else None
        if silence != screen.job_bar.silence:
            screen.job_bar.silence = silence
            self.changed("silence")
        if hang != screen.job_bar.hang:
            screen.pods_table.show_hang(hang)
            screen.job_bar.hang = hang
            screen.timeline.show_hang(hang)
            self.changed("hang")
        stragglers = screen.timeline.model.stragglers()
        slowest = stragglers[0] if stragglers else None
        if slowest != screen.job_bar.straggler or stragglers != tuple(screen.pods_table.stragglers.values()):
            screen.pods_table.show_stragglers(stragglers)
            screen.job_bar.straggler = slowest
            self.changed("straggler")
        if hang is not None and hang.unheard and self.followed and self._asked != (self.followed, hang.step):
            self._asked = (self.followed, hang.step)
            self.run(self._hear_from(self.followed, hang.unheard), group="last-lines", exclusive=True)

    async def _hear_from(self, job: str, ranks: tuple[int, ...]) -> None:
        cluster = self.screen.session.cluster
        lines = await self.call(f"read the last lines of {len(ranks)} ranks", cluster.last_lines(job, ranks))
        if lines and job == self.followed:
            self.screen.timeline.model.heard(lines)
            self.show_hang()
            self.changed("hang")

    def show_goodput(self) -> None:
        """The followed job's goodput so far, to the job bar and the timeline (on a timer)."""
        screen = self.screen
        report = screen.timeline.model.goodput_report(screen.clock())
        if report != screen.job_bar.goodput:
            screen.job_bar.show_goodput(report)
            screen.timeline.show_goodput(report)
            self.changed("goodput")


def _first_focus(job: "JobSummary | None") -> "LogFocus":
    """Whose logs to read before the pods panel says which ranks it shows: every rank of a group
    small enough for a row each (read from their first lines, not joined later from their last),
    else rank 0."""
    from backend.models import DRIVER_RANK, MAX_FOLLOWED, LogFocus

    if job is not None and job.num_nodes <= MAX_FOLLOWED - 1:
        return LogFocus([0, *range(1, job.num_nodes), DRIVER_RANK])
    return LogFocus([0])


def _job_gone(exc: BaseException) -> bool:
    """NotFound: the job was deleted; watching it again cannot help."""
    return isinstance(exc, NotFound)
