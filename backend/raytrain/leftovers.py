"""Finding every process a Ray run started, so none outlives it.

The launcher puts KFCOCKPIT_RAY_RUN=<run name> in the driver's environment. Ray's own processes
(gcs_server, raylet, the agents, the log monitor) and its workers inherit it, even after they are
re-parented, so /proc tells exactly which processes belong to a run and nothing else is touched
(the same env markers the local cluster finds its pods' descendants by: backend.processes).
Waiting for them to exit uses pidfds: an event per process, no polling.
"""

from __future__ import annotations

import signal

from backend.processes import is_zombie_or_gone, marked_processes, sweep, wait_gone_async

MARKER = "KFCOCKPIT_RAY_RUN"


def run_processes(run: str) -> list[int]:
    """Pids of live (not zombie) processes carrying this run's marker."""
    return [pid for pid in marked_processes({MARKER: run}) if not is_zombie_or_gone(pid)]


async def reap_async(run: str, grace: float = 5.0) -> list[int]:
    """Give a finished run's processes `grace` seconds to exit, then SIGKILL the rest.

    Returns the pids that had to be killed (empty when Ray shut itself down cleanly)."""
    if not await wait_gone_async(run_processes(run), grace):
        return []
    stragglers = sweep({MARKER: run}, signal.SIGKILL)
    await wait_gone_async(stragglers, grace)
    return stragglers
