"""Start → first paint of the cockpit, against a bare Textual app, in the same invocation.

Each program runs in a fresh pseudo-terminal (80x24), as a person starts it; the clock runs from
spawning the interpreter until the terminal receives the first frame (a word only that frame
contains). Runs alternate so both see the same machine load; the medians are compared.

Goal: cockpit <= 1.5x the bare app. The cockpit reaches its first frame before it imports the
backend (that happens in a thread after the frame), which is what makes the goal reachable.

    .venv/bin/python bench/tui_start.py [--runs 7]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Header, Static

class Bare(App):
    def compose(self):
        yield Header()
        yield Static("bare-ready")
        yield Footer()

Bare().run()
"""


def first_paint(argv: list[str], marker: bytes, env: dict[str, str], timeout: float = 30.0) -> float:
    """Seconds from spawn to the marker appearing on the terminal."""
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes the program, on the pty
        try:
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    seen = b""
    try:
        while marker not in seen:
            left = timeout - (time.perf_counter() - start)
            if left <= 0:
                raise TimeoutError(f"{argv}: no first paint within {timeout} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the child exited
                    raise RuntimeError(f"{argv} exited before painting:\n{seen.decode(errors='replace')}") from None
                seen = seen[-4096:] + chunk
        return time.perf_counter() - start
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def stop_local_controller(home: Path) -> None:
    """The cockpit connects after its first paint and may start the embedded cluster's controller
    in the bench's home: stop it so the bench leaves nothing running."""
    import asyncio

    from backend.local.embedded import Embedded

    asyncio.run(Embedded(home).down())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="kfc-start-") as home:
        env = dict(os.environ, TERM="xterm-256color", COLUMNS="80", LINES="24",
                   KFCOCKPIT_HOME=home, PYTHONPATH=str(ROOT))
        env.pop("NO_COLOR", None)
        programs = {
            "bare textual app": ([python, "-c", BARE_APP], b"bare-ready"),
            "kfcockpit": ([python, "-m", "tui"], b"lesson"),
        }
        times: dict[str, list[float]] = {name: [] for name in programs}
        for argv, marker in programs.values():  # one warm-up each: disk cache, .pyc files
            first_paint(argv, marker, env)
        for _ in range(args.runs):
            for name, (argv, marker) in programs.items():
                times[name].append(first_paint(argv, marker, env))
        stop_local_controller(Path(home))
    bare = statistics.median(times["bare textual app"])
    cockpit = statistics.median(times["kfcockpit"])
    print(f"start -> first paint, 80x24 pty, median of {args.runs} runs each")
    for name, values in times.items():
        print(f"  {name:<18} {statistics.median(values) * 1000:7.0f} ms   "
              f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f})")
    ratio = cockpit / bare
    ok = ratio <= 1.5
    print(f"  ratio cockpit/bare: {ratio:.2f}x   {'PASS' if ok else 'FAIL'} (goal <= 1.5x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
