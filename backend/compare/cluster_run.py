"""One measured run through the Cluster protocol, whatever the launcher: apply the job, follow its
merged logs, kill the planned worker's pod once the kill step shows, wait for the job, read its
metrics.json from the volume. A TrainJob and a RayJob go through exactly this."""

from __future__ import annotations

import contextlib
import time
from typing import Callable

from backend.cluster import Cluster, ClusterError, NotFound
from backend.compare.figures import ComparisonPlan
from backend.compare.observer import ObservationError, RunObserver
from backend.models import JobPhase, LogLine, RayJob, RunMetrics, TrainJob

OnLines = Callable[[str, list[LogLine]], None]

_WAIT_SECONDS = 900.0  # for the job to finish after its logs ended (they end with it)


async def measure_job(cluster: Cluster, plan: ComparisonPlan, job: TrainJob | RayJob,
                      volume: str, run: str, on_lines: OnLines | None = None) -> dict:
    """The measured fields of a Measurement; `run` is where the job's metrics.json lands on
    `volume`. ObservationError when the run did not show a kill, a resume and an end.
    `on_lines(job, batch)` sees every batch as it streamed: a killed pod's log goes with it."""
    name = job.metadata.name
    launched = time.time()
    await cluster.apply(job)
    observer = RunObserver(plan, launched)
    try:
        async for batch in cluster.stream_logs(name):  # ends when the job does
            if on_lines is not None:
                on_lines(name, batch)
            for line in batch:
                pod = observer.see(line)
                if pod is not None:
                    try:
                        await cluster.kill_pod(pod)
                    except NotFound:
                        raise ObservationError(f"pod {pod} ended before it could be killed") from None
                    observer.killed(time.time())
    except BaseException:  # an error or Ctrl-C while measuring: the job does not go on running
        with contextlib.suppress(ClusterError):
            await cluster.delete(job.kind, name)
        raise
    summary = await cluster.wait_job(name, frozenset({JobPhase.COMPLETE}), _WAIT_SECONDS)
    if summary.phase != JobPhase.COMPLETE:
        raise ObservationError(f"{job.kind} {name} ended {summary.phase.value}: {summary.message} "
                               f"(see: kfcockpit logs {name})")
    final = RunMetrics.of_run(await cluster.read_metrics(volume), run)
    return observer.figures(summary.finished or time.time(), final)
