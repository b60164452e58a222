"""Leave when the terminal goes away.

Over SSH or in tmux the terminal can vanish without the app being sent SIGHUP (the shell or
`make` in front of it dies first). Textual's input thread then reads end-of-file forever and
spins a core, and its writer blocks on a dead tty. A thread that sleeps in poll() until the
terminal hangs up turns that into the SIGHUP it should have been: the process ends, the jobs on
the cluster run on (the controller is detached), and notes were kept as they were typed.
"""

from __future__ import annotations

import os
import select
import signal
import threading


def _wait_for_hangup(fd: int) -> None:
    poller = select.poll()
    poller.register(fd, 0)  # no events asked for: poll() returns only on hangup or error
    while True:
        for _, mask in poller.poll():
            if mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                os.kill(os.getpid(), signal.SIGHUP)
                return


def leave_on_hangup(fd: int = 0) -> bool:
    """Watch the terminal on `fd` (call from the main thread, before the app runs); False when
    there is no terminal to watch (tests, pipes, textual-serve's pty counts as one)."""
    if not os.isatty(fd):
        return False
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    threading.Thread(target=_wait_for_hangup, args=(fd,), name="terminal-hangup", daemon=True).start()
    return True
