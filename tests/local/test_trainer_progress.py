"""TrainJob progress end to end on the embedded cluster (Trainer v2.3.0's TrainJobStatus gate on,
docs/user-guides/trainjob-progress.md): the lesson's job's rank 0 reports through the status
server with its projected token, `kubectl get trainjob -o jsonpath='{.status.trainerStatus}'`
shows it, and the cockpit's job summaries carry it, rising, as the job runs."""

from __future__ import annotations

import asyncio
import json

from tests.local.conftest import WAIT, apply_all, kubectl, lesson_job, lesson_resources


async def test_the_lessons_job_reports_rising_progress_into_its_trainer_status(cluster, home):
    await apply_all(cluster, *lesson_resources())
    await cluster.apply(lesson_job("progress", steps=120, step_delay=0.1))  # ~12 s: reports every 5 s
    seen: list[int] = []

    async def progress_rises() -> None:
        async for summary in cluster.watch_jobs():
            if summary.name == "progress" and summary.progress is not None and summary.progress not in seen:
                seen.append(summary.progress)
                if len(seen) == 2:
                    return

    await asyncio.wait_for(progress_rises(), WAIT)
    assert seen == sorted(seen) and 0 <= seen[0] < seen[1] <= 100, seen
    shown = await asyncio.to_thread(kubectl, home, "get", "trainjob", "progress",
                                    "-o", "jsonpath={.status.trainerStatus}")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert 0 < status["progressPercentage"] <= 100 and "lastUpdatedTime" in status
    assert {m["name"] for m in status["metrics"]} >= {"loss"}
