"""The followed job deleted and applied again under the same name (a learner starting over): the
cockpit follows the new job, its pods and its logs, instead of the old job's ended watches and a
table of the old pods whose silence reads as a hang."""

from __future__ import annotations

from backend.models import LogLine, Pod, PodEvent, PodEventType, PodPhase
from tests.tui.conftest import wait_until
from tests.tui.scripted import JOB, T0, scripted_app


def pod(rank: int, suffix: str) -> Pod:
    return Pod(name=f"{JOB}-node-0-{rank}-{suffix}", job=JOB, rank=rank, restart_attempt=0,
               phase=PodPhase.RUNNING, created=T0, started=T0 + 1)


async def test_a_job_applied_again_under_its_name_is_followed_afresh(home):
    app, cluster, now = scripted_app(home)
    async with app.run_test(size=(120, 40)):
        screen = app.screen
        await wait_until(screen, lambda: screen.following.followed == JOB and cluster.streams == 1, "the job followed")
        for rank in (0, 1):
            cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=pod(rank, "old00")))
        await wait_until(screen, lambda: len(screen.pods_table.pods) == 2, "the old job's pods")

        cluster.jobs.put_nowait(cluster.job.model_copy(update={"created": T0 + 60}))  # deleted, applied again
        await wait_until(screen, lambda: cluster.streams == 2 and not screen.pods_table.pods,
                         "the new job followed from the start")
        cluster.pods.put_nowait(PodEvent(type=PodEventType.ADDED, pod=pod(0, "new00")))
        cluster.logs.put_nowait([LogLine.parsed(f"{JOB}-node-0-0-new00", 0, T0 + 62, "step=1 loss=0.5 rank=0 world=2")])
        await wait_until(screen, lambda: list(screen.pods_table.pods) == [f"{JOB}-node-0-0-new00"], "the new pod")
