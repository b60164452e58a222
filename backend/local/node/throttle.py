"""A pod slowed on purpose (`kfcockpit pod slow POD --factor F`): a straggler to practise on.

This project's own, no upstream kubelet has it. A SIGSTOP/SIGCONT duty cycle driven by a loop timer:
every tick the pod's processes are stopped for as long as they were busy since the last tick
(running, or runnable and waiting for a core: /proc/PID/schedstat) times (1/F - 1), so each second
of their computing takes 1/F seconds, as on a CPU F times as fast, however loaded the machine.
Not cgroup v2's cpu.max: a quota caps CPU time per period whatever the pod needs, so a rank that
uses less than its quota (one that waits in collectives and between steps, or that shares a loaded
machine's cores with its peers) is not slowed at all; and this node's pods have no cpu cgroup
(limits.py bounds pids and memory). The pause owed is paid when a tick finds a process running
(state R), so it lands in the rank's compute, not in its sleeps and waits, which would cost it
nothing. Each process's main thread is read (where torch computes with one intra-op thread, the
pods' default; a collective's threads wait).
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Callable, Collection

TICK = 0.01  # seconds between looks at the time busy: short against a step's compute
_MAX_PAUSE = 1.0  # seconds: a pod made to wait owes no more (a factor of 0.01 stays responsive)
_REFRESH_TICKS = 50  # the pod's processes listed again this often (a /proc scan)


def busy_seconds(pids: Collection[int]) -> float:
    """Seconds these processes' main threads ran or waited to run (/proc/PID/schedstat: time on
    a CPU and time on a run queue, in nanoseconds); a stopped or sleeping thread is neither."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat", "rb") as f:
                ran, queued, _ = f.read().split()
        except (OSError, ValueError):
            continue  # gone
        total += int(ran) + int(queued)
    return total / 1e9


def running(pids: Collection[int]) -> bool:
    """Whether one of these processes' main threads is running or runnable now (/proc/PID/stat)."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split(maxsplit=1)[0] == b"R":
                    return True
        except (OSError, IndexError):
            continue
    return False


class Throttle:
    """Stops and continues `processes()` so they compute at `factor` of their speed, until `stop`.
    `held()`: the pod is frozen meanwhile, so a pause's end must not continue it."""

    def __init__(self, factor: float, processes: Callable[[], Collection[int]], held: Callable[[], bool]):
        self.factor, self.processes, self.held = factor, processes, held
        self._pids: Collection[int] = ()
        self._ticks = 0
        self._used = 0.0
        self._owed = 0.0  # seconds of pause owed for the time busy so far
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False

    def start(self) -> None:
        self._pids = self.processes()
        self._used = busy_seconds(self._pids)
        self._timer = asyncio.get_running_loop().call_later(TICK, self._tick)

    def stop(self) -> None:
        """No more pauses; a pause under way ends now (unless the pod is frozen)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._paused:
            self._continue()

    def _tick(self) -> None:
        self._ticks += 1
        if self._ticks % _REFRESH_TICKS == 0:
            self._pids = self.processes()
        used = busy_seconds(self._pids)
        self._owed = min(_MAX_PAUSE, self._owed + max(0.0, used - self._used) * (1 / self.factor - 1))
        self._used = used
        loop = asyncio.get_running_loop()
        if self._owed < TICK / 2 or self.held() or not running(self._pids):
            self._timer = loop.call_later(TICK, self._tick)
            return
        self._signal(signal.SIGSTOP)
        self._paused = True
        self._timer = loop.call_later(self._owed, self._resume)
        self._owed = 0.0

    def _resume(self) -> None:
        self._continue()
        self._timer = asyncio.get_running_loop().call_later(TICK, self._tick)

    def _continue(self) -> None:
        self._paused = False
        if not self.held():
            self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        for pid in self._pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
