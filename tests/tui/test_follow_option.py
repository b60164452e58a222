"""`kfcockpit --follow JOB` and `kubectl cockpit JOB` (issue 48): the cockpit opens following the
named job rather than the newest; a job the cluster does not have is a notification, a name no
cluster can hold one line and exit 2 before the UI starts."""

from __future__ import annotations

import pytest

from backend.models import JobPhase, JobSummary
from tests.tui.conftest import wait_until
from tests.tui.scripted import JOB, T0, scripted_app
from tui.cli import build_parser, main
from tui.cli.app_cmds import forwarded_options, launch_from_args
from tui.cli.kubectl_plugin import build_parser as kubectl_parser
from tui.cli.kubectl_plugin import main as kubectl_main

LESSON = "lesson-ddp"


def job(name: str, created: float) -> JobSummary:
    return JobSummary(name=name, phase=JobPhase.RUNNING, num_nodes=2, max_restarts=3, created=created)


def two_jobs(home, follow: str | None):
    """The scripted cockpit over two running jobs: lesson-ddp, and a newer one it would follow by
    itself."""
    app, cluster, _ = scripted_app(home)
    app.launch.follow = follow

    async def list_jobs():
        return [job(LESSON, T0 - 600), cluster.job]

    cluster.list_jobs = list_jobs
    return app, cluster


async def first_followed(home, follow: str | None) -> tuple[str | None, bool, list[str]]:
    """The job the scripted cockpit over two jobs follows first: its name, whether it counts as
    the user's choice, and what the cockpit notified."""
    app, _ = two_jobs(home, follow)
    async with app.run_test(size=(120, 40)):
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed is not None, "a job followed")
        assert screen.job_bar.followed == screen.following.followed
        return (screen.following.followed, screen.following.followed_by_user,
                [n.message for n in app._notifications])


async def test_follow_opens_the_cockpit_on_that_job_not_the_newest(home):
    followed, by_user, _ = await first_followed(home, LESSON)
    assert followed == LESSON
    assert by_user  # a newer job does not take it over


async def test_without_follow_the_newest_job_is_followed(home):
    followed, by_user, _ = await first_followed(home, None)
    assert (followed, by_user) == (JOB, False)


async def test_a_job_the_cluster_does_not_have_is_a_notification_and_the_newest_is_followed(home):
    followed, _, said = await first_followed(home, "no-such-job")
    assert followed == JOB
    assert any("no job named no-such-job here yet" in message for message in said), said


async def test_a_job_applied_after_the_cockpit_opened_is_followed_once_it_appears(home):
    """`kfcockpit --follow my-job` in one pane, `kubectl apply` of my-job in another."""
    app, cluster = two_jobs(home, "late-job")
    async with app.run_test(size=(120, 40)):
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB, "the newest followed meanwhile")
        cluster.jobs.put_nowait(job("late-job", T0 + 60))
        await wait_until(screen, lambda: screen.following.followed == "late-job", "the named job followed")
        assert screen.following.followed_by_user


def test_follow_namespace_and_context_reach_the_launch_and_the_settings(tmp_path):
    args = build_parser().parse_args(["--follow", LESSON, "-n", "team-a", "--context", "kind-x",
                                      "--home", str(tmp_path)])
    launch = launch_from_args(args)
    assert launch.follow == LESSON and launch.platform == "kube"
    settings = launch.make_settings()
    assert (settings.namespace, settings.context, settings.backend) == ("team-a", "kind-x", "kube")
    assert forwarded_options(args)[-2:] == ["--follow", LESSON]  # serve's cockpits follow it too


def test_kubectl_cockpit_is_kfcockpit_follow(tmp_path):
    args = kubectl_parser().parse_args([LESSON, "-n", "team-a", "--context", "kind-x", "--home", str(tmp_path)])
    launch = launch_from_args(args)
    assert launch.follow == LESSON
    assert (launch.make_settings().namespace, launch.make_settings().context) == ("team-a", "kind-x")


@pytest.mark.parametrize("run, argv, says", [
    (main, ["--follow", "Lesson_DDP"], "--follow 'Lesson_DDP': not a job name"),
    (main, ["--follow", ""], "--follow '': not a job name"),
    (main, ["serve", "--follow", "a_b"], "--follow 'a_b': not a job name"),
    (kubectl_main, ["lesson ddp"], "--follow 'lesson ddp': not a job name"),
    (kubectl_main, [], "the following arguments are required: JOB"),
])
def test_bad_follow_input_is_one_line_and_exit_2_before_the_ui(run, argv, says, capsys, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        code = run([*argv, "--home", str(tmp_path)])
        raise SystemExit(code)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and err.startswith("kfcockpit: ")
