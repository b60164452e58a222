"""A job as the cockpit knows it (DESIGN.md, "A job, as the cockpit knows it"; issue 43), through
the screen's real watches from a scripted cluster (no controller):

- opened after it restarted twice (and opened again with `j`), its restarts, timeline and goodput
  are rebuilt from what the platform and the volume keep, the same function `kfcockpit goodput`
  measures with (backend.goodput.job.job_history), and agree with it;
- a job deleted and applied again under the same name is another job (its JobSet uid): the old
  one's pods and lines are not shown with it;
- a group silent because its pods wait for a node, or restart, is named as such, never HUNG."""

from __future__ import annotations

import pytest

from backend.goodput.job import measure_job
from backend.goodput.report import RESTART_POINTS
from backend.models import JobPhase, LogLine, Pod, PodEvent, PodEventType, PodPhase
from tests.tui.conftest import wait_until
from tests.tui.scripted import JOB, T0, scripted_app


def pod(rank: int, attempt: int, phase: PodPhase = PodPhase.RUNNING, uid: str = "uid-1", **kw) -> Pod:
    return Pod(name=f"{JOB}-node-0-{rank}-a{attempt}{uid[-1]}x", job=JOB, rank=rank, restart_attempt=attempt,
               phase=phase, created=kw.pop("created", T0 + 30 * attempt), job_uid=uid, **kw)


def group(attempt: int, at: float, first: int, last: int, resumed_from: int | None = None,
          end: str = "saved") -> list[tuple[float, int, str]]:
    """(seconds after T0, rank, line) of one group of two ranks: its start, its resume, its steps a
    second apart, then a survivor's save at a failure (`saved`) or its end (`done`)."""
    lines = [(at, rank, f"event=start rank={rank} world=2 pid={100 * attempt + rank} steps=25 restart={attempt}")
             for rank in (0, 1)]
    if resumed_from is not None:
        lines += [(at + 0.5, rank, f"event=resumed from_step={resumed_from} rank={rank} world=2 "
                   "restore_seconds=0.1") for rank in (0, 1)]
    lines += [(at + 1 + i, rank, f"step={s} loss={1 / s:.6f} rank={rank} world=2")
              for i, s in enumerate(range(first, last + 1)) for rank in (0, 1)]
    done = at + 1 + last - first + 0.5
    if end == "saved":
        lines.append((done, 0, f"event=checkpoint_saved step={last} reason=peer_failure file=x bytes=1 "
                      "seconds=0.2 rank=0"))
    else:
        lines += [(done, rank, f"event=done step={last} rank={rank} world=2") for rank in (0, 1)]
    return lines


def live(lines: list[tuple[float, int, str]], attempt: int, late: float = 0.01) -> list[LogLine]:
    """The same lines as the pods' logs give them: stamped a little later than recorded."""
    return [LogLine.parsed(pod(rank, attempt).name, rank, T0 + at + late, text) for at, rank, text in lines]


def agrees(model, cli, now: float, opened: str):
    """The cockpit's timeline model shows what `kfcockpit goodput` measured (`cli`): its restarts,
    a timeline entry each timed at its points, and its goodput within 0.01. Its report."""
    shown = model.goodput_report(now)
    assert shown.restarts == cli.restarts, opened
    assert shown.goodput == pytest.approx(cli.goodput, abs=0.01), (opened, shown, cli)
    assert len(model.restarts()) == len(cli.restart_times), opened
    for restart, measured in zip(model.restarts(), cli.restart_times):
        assert restart.attempt == measured.attempt - 1, opened
        points = [at for point in RESTART_POINTS if (at := getattr(measured, point)) is not None]
        assert [m.at for m in restart.moments] == pytest.approx(points, abs=0.01), opened
        if measured.seconds is not None:
            assert restart.recovery_seconds == pytest.approx(measured.seconds, abs=0.01), opened
    return shown


async def test_a_job_opened_after_two_restarts_and_again_with_j_agrees_with_kfcockpit_goodput(home):
    app, cluster, now = scripted_app(home)
    runs = [group(0, 2.0, 1, 10), group(1, 20.0, 11, 15, resumed_from=10),
            group(2, 32.0, 16, 25, resumed_from=15, end="done")]
    cluster.job = cluster.job.model_copy(update={
        "phase": JobPhase.COMPLETE, "restart_attempt": 2, "finished": T0 + 43.0,
        "run_dirs": [("checkpoints", "run")]})
    cluster.records = sorted((T0 + at, text) for run in runs for at, _, text in run)
    newest = [pod(rank, 2, PodPhase.SUCCEEDED, started=T0 + 31, finished=T0 + 43) for rank in (0, 1)]
    cluster.listed = newest  # JobSet deleted the first two groups' pods, and their logs with them
    cli = (await measure_job(cluster, JOB)).goodput
    assert cli.restarts == 2 and len(cli.restart_times) == 2
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        for opened in ("at start", "again with j"):
            await wait_until(screen, lambda: screen.following.followed == JOB, "the cockpit to follow the job")
            model = screen.timeline.model
            for p in newest:
                cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=p))
            cluster.logs.put_nowait(live(runs[2], 2))  # the newest group's log, read again
            now[0] = T0 + 50.0
            await wait_until(screen, lambda model=model: len(model.restarts()) == 2 and model.history is not None
                             and screen.job_bar.goodput is not None
                             and screen.job_bar.goodput.steps_kept == 25, f"the history ({opened})")
            shown = agrees(model, cli, now[0], opened)
            assert shown.steps_lost == cli.steps_lost and shown.steps_kept == cli.steps_kept, opened
            screen.timeline.redraw()  # what its timer does: the restarts drawn, not "no restart yet"
            assert not screen.timeline.query_one("#timeline-empty").display, opened
            assert screen.timeline.border_subtitle.startswith("2 restarts"), opened
            screen.following.follow("another-job", by_user=True)
            await pilot.pause()
            screen.following.follow(JOB, by_user=True)  # what j does once the learner picks it


async def test_a_job_applied_again_under_its_name_shows_nothing_of_the_one_before(home):
    app, cluster, now = scripted_app(home)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB, "the cockpit to follow the job")
        # the deleted job's pods, still Terminating, listed first; its lines in the merged log
        for rank in (0, 1):
            old = pod(rank, 1, PodPhase.FAILED, uid="uid-0", created=T0 - 100, reason="Terminating",
                      exit_code=92, finished=T0 - 5)
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=old))
        cluster.logs.put_nowait(live(group(1, -90.0, 1, 5), 1))
        for rank in (0, 1):
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=pod(rank, 0, started=T0 + 1)))
        cluster.logs.put_nowait([LogLine.parsed(pod(r, 0).name, r, T0 + at, text) for at, r, text in
                                 group(0, 2.0, 1, 3)[:-1]])
        now[0] = T0 + 6.0
        await wait_until(screen, lambda: screen.pods_table.steps.get(pod(1, 0).name, (0,))[0] == 3,
                         "the new job's steps")
        await pilot.pause()
        assert set(screen.pods_table.pods) == {pod(0, 0).name, pod(1, 0).name}
        assert screen.timeline.model.restarts() == []
        assert set(screen.log_view.buffer.pods) == {pod(0, 0).name, pod(1, 0).name}
        assert screen.loss_chart.restarts.get(JOB, set()) == set()
        assert screen.timeline.model.goodput_report(now[0]).restarts == 0


async def test_a_lost_node_is_a_wait_and_a_restart_in_the_job_bar_never_a_hang(home):
    """The group trains; rank 1's node is lost; rank 0 fails on the lost peer; the new group's
    rank 1 waits for a node (Unschedulable), then runs and resumes. The bar names the wait and the
    restart, never says HUNG however long the silence, then shows steps again; a group that stops
    while all its pods run is still a hang."""
    app, cluster, now = scripted_app(home)
    async with app.run_test(size=(200, 45)) as pilot:
        screen = app.screen
        bar = screen.job_bar
        hangs = []
        # its own subscriber: wait_until unsubscribes the screen's
        screen.changed.subscribe(bar, lambda _: hangs.append(bar.hang) if bar.hang else None)
        await wait_until(screen, lambda: screen.following.followed == JOB, "the cockpit to follow the job")
        for rank in (0, 1):
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=pod(rank, 0, started=T0 + 1,
                                                                             node=f"kfcockpit-worker{rank + 1}")))
        cluster.logs.put_nowait(live(group(0, 2.0, 1, 10)[:-1], 0, late=0))
        now[0] = T0 + 12.0
        await wait_until(screen, lambda: bar._progress[0] == 10, "the group's steps")
        cluster.pods.put_nowait(PodEvent(type=PodEventType.MODIFIED, pod=pod(
            0, 0, PodPhase.FAILED, started=T0 + 1, finished=T0 + 13, reason="Error", exit_code=1,
            node="kfcockpit-worker1")))
        for rank in (0, 1):
            gone = pod(rank, 0, node=f"kfcockpit-worker{rank + 1}")
            cluster.pods.put_nowait(PodEvent(type=PodEventType.DELETED, pod=gone))
        cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=pod(0, 1, started=T0 + 31,
                                                                         node="kfcockpit-worker1")))
        cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=pod(
            1, 1, PodPhase.PENDING, reason="Unschedulable",
            message="0/3 nodes are available: 1 node(s) had untolerated taint")))
        now[0] = T0 + 60.0  # far past the hang's floor
        await wait_until(screen, lambda: (bar.silence or "").startswith("waiting for a node"), "the wait named")
        assert "0/3 nodes are available: 1 node(s) had untolerated taint" in bar.silence
        await pilot.pause()
        assert "waiting for a node" in bar.render().plain and "HUNG" not in bar.render().plain
        cluster.pods.put_nowait(PodEvent(type=PodEventType.MODIFIED, pod=pod(1, 1, started=T0 + 62,
                                                                            node="kfcockpit-worker1")))
        now[0] = T0 + 80.0
        await wait_until(screen, lambda: (bar.silence or "").startswith("restarting after"), "the restart named")
        cluster.logs.put_nowait([LogLine.parsed(pod(r, 1).name, r, T0 + at, text) for at, r, text in
                                 group(1, 80.0, 11, 12, resumed_from=10)[:-1]])
        now[0] = T0 + 83.5
        await wait_until(screen, lambda: bar.silence is None and bar._progress[0] == 12, "steps again")
        assert hangs == []
        screen.changed.unsubscribe(bar)
        now[0] = T0 + 120.0  # every pod runs and none prints: that is a hang
        await wait_until(screen, lambda: bar.hang is not None, "a hang of the running group")


async def test_a_job_applied_again_within_the_same_second_is_another_job(home):
    """Its creationTimestamp (whole seconds) equals the deleted one's: its uid tells them apart,
    and the cockpit follows the new one afresh (once seen in CI: the old job's last steps shown
    beside the new one's Complete)."""
    app, cluster, now = scripted_app(home)
    cluster.job = cluster.job.model_copy(update={"uid": "uid-first"})
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB, "the cockpit to follow the job")
        await wait_until(screen, lambda: cluster.streams == 1, "its log stream")
        cluster.jobs.put_nowait(cluster.job.model_copy(update={"uid": "uid-again", "phase": JobPhase.CREATED}))
        await wait_until(screen, lambda: cluster.streams == 2, "a log stream for the job applied again")
        await pilot.pause()
        assert screen.following.jobs[JOB].uid == "uid-again" and screen.following.followed == JOB


def test_a_job_is_its_uid_and_its_creation_time_only_where_no_uid_is_known():
    from backend.models import JobSummary

    first = JobSummary(name="j", phase=JobPhase.RUNNING, num_nodes=2, created=100.0, uid="a")
    assert first.same_job(first.model_copy(update={"phase": JobPhase.COMPLETE}))
    assert not first.same_job(first.model_copy(update={"uid": "b"}))
    assert first.same_job(first.model_copy(update={"uid": ""}))  # a recording made before uids
    assert not first.same_job(first.model_copy(update={"uid": "", "created": 101.0}))


async def test_the_old_jobs_pods_made_in_the_same_second_are_told_apart_by_the_jobsets_uid(home):
    """Pods of the job deleted before, made within the second the new job was (creation times are
    whole seconds), still Terminating and listed first: the new job's JobSet uid, in its summary,
    says they are not its own (once seen in CI: the old pods' last steps shown, the new job's never)."""
    app, cluster, now = scripted_app(home)
    cluster.job = cluster.job.model_copy(update={"uid": "trainjob-2", "group_uid": "uid-1"})
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB, "the cockpit to follow the job")
        for rank in (0, 1):
            old = pod(rank, 0, uid="uid-0", created=T0, reason="Terminating")
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=old))
        for rank in (0, 1):
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=pod(rank, 0, started=T0 + 1)))
        await wait_until(screen, lambda: len(screen.pods_table.pods) == 2, "the new job's pods")
        await pilot.pause()
        assert set(screen.pods_table.pods) == {pod(0, 0).name, pod(1, 0).name}
