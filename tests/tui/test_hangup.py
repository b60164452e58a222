"""The cockpit leaves when its terminal hangs up, even when no SIGHUP reaches it (tmux or SSH
gone while `make` stood in front of it): otherwise Textual's input thread spins on end-of-file."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys, threading
from tui.hangup import leave_on_hangup
assert leave_on_hangup(int(sys.argv[1]))
print("watching", flush=True)
threading.Event().wait()   # stands in for the running app
"""


def test_a_terminal_that_hangs_up_ends_the_process():
    master, slave = pty.openpty()
    # Not the terminal's session leader nor in its process group: the kernel sends it nothing.
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(slave)], cwd=ROOT, pass_fds=(slave,),
                             stdout=subprocess.PIPE, text=True)
    os.close(slave)
    try:
        assert child.stdout.readline().strip() == "watching"
        os.close(master)  # the terminal goes away
        assert child.wait(timeout=60) == -signal.SIGHUP
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_no_terminal_no_watcher():
    from tui.hangup import leave_on_hangup

    read, write = os.pipe()
    try:
        assert leave_on_hangup(read) is False
    finally:
        os.close(read)
        os.close(write)
