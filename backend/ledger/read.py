"""The attempt ledger of a job as its platform has it now, read through the Cluster protocol: the
job, its pods, the namespace's Events, and its workers' lines (the run record on its volume, else
its pods' logs) for each group's first step."""

from __future__ import annotations

from backend.goodput.model import Goodput
from backend.ledger.rows import FirstGroup, Ledger, build_ledger


async def read_ledger(cluster, job: str, lines: Goodput | None = None) -> Ledger:
    """NotFound for a job that does not exist. `lines`: the workers' lines already read (the
    cockpit's, fed as they come), so they are not read again."""
    summary = await cluster.get_job(job)
    pods = await cluster.list_pods(job)
    events = await cluster.list_events()
    if lines is None:
        lines = await _read_lines(cluster, summary)
    groups = [FirstGroup(a.started, a.first_step, a.times[0] if a.times else None)
              for a in lines.attempts if a.started >= summary.created - 1.0]
    return build_ledger(summary, pods, events, groups)


async def _read_lines(cluster, summary) -> Goodput:
    lines = Goodput(started=summary.created)  # only its groups are read: when each formed, its first step
    recorded = [(at, line) for volume, run in summary.run_dirs for at, line in await cluster.run_records(volume, run)]
    if recorded:
        for at, line in sorted(recorded):
            lines.feed(at, line)
    else:
        async for batch in cluster.stream_logs(summary.name, follow=False):
            lines.feed_lines(batch)
    return lines
