"""When a process began, from /proc: what the kernel counts (clock ticks since boot) and, for this
process, the time of day.

A group's `event=start` line is printed once the group has formed; its processes began earlier
(a pod forked from a warm worker, a process exec'd by torchrun), and the restart breakdown wants
both points. The platform's pod timestamps are whole seconds; the kernel's are 10 ms ticks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


_PF_EXITING = 0x4  # include/linux/sched.h


def start_ticks(pid: int) -> str | None:
    """Process `pid`'s start, clock ticks since boot (as /proc gives it), None if it is gone, a
    zombie or exiting: with the pid, it names one process (a reused pid starts later). Exiting
    (PF_EXITING) counts as gone: a killed process closes its sockets before it is a zombie, so a
    peer that heard them close may look it up in between."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3, flags 9
    return None if fields[0] in ("Z", "X") or int(fields[6]) & _PF_EXITING else fields[19]


def started_at() -> float | None:
    """This process's start, epoch seconds to a tick; None where /proc cannot tell (not Linux).
    From its age since boot, not /proc/stat's btime, which is whole seconds."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        ticks = start_ticks(os.getpid())
        return None if ticks is None else time.time() - (uptime - int(ticks) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None
