"""How many bytes a second the cockpit writes to its terminal, and how much CPU it burns, while it
follows a job's logs at a steady line rate.

Each subject runs as a child on a pseudo-terminal of the given size, with Textual's real Linux
driver (what an SSH session or a projector's terminal receives). The parent reads the pty and
counts the bytes of a measured window that starts once the feed has settled; the child reports
the CPU seconds it spent in that window (every thread of the UI process; the embedded cluster's
controller and the workers are other processes and are not counted).

Subjects, in the same run:
- baseline: a bare Textual app whose only widget is a full-screen `Log` fed synthetic step lines
  of N workers at a steady rate — the least any app pays to show them;
- idle: the cockpit following the job with no lines arriving (clocks, spinners, tables);
- cockpit: the cockpit fed the same synthetic lines through the method the log stream worker
  calls (the logs, loss chart and timeline; no pod changes);
- job: the cockpit as a learner has it: the lesson's TrainJob (manifests/trainjob.yaml, two
  workers, `--step-delay` paced to about the rate asked) on the embedded cluster, followed for
  real: pod watch, merged log stream, metrics sampling, the pods table and the job bar stepping.
  Its baseline is a bare Log fed the rate the job reached, in the same run.

Goal (issues 14 and 30): <= 40 kB/s at 100 lines/s at 120x40, on the real job.

    .venv/bin/python bench/tui_bytes.py [--rates 10,100] [--sizes 120x40,80x24] [--seconds 5]
    .venv/bin/python bench/tui_bytes.py --job-only --sizes 120x40     # the real job alone (and its baseline)
    .venv/bin/python bench/tui_bytes.py --profile 10 --sizes 120x40   # cProfile of the cockpit child
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import pty
import re
import selectors
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICK = 0.01  # the feeder delivers a batch every 10 ms at most, like a log stream does
SETTLE_SECONDS = 2.0  # after the feed starts: the first screens of lines, the first chart
GOAL_BYTES_PER_SECOND = 40_000
GOAL_RATE, GOAL_SIZE = 100, (120, 40)
JOB_WORKERS = 2  # the lesson's job
JOB_SETTLE_SECONDS = 3.0  # after the job's first lines: pods running, the table and chart filled


# ------------------------------------------------------------------ the child (on the pty)


def _line(workers: int, i: int, now: float):
    from backend.models import LogLine

    rank, step = i % workers, i // workers
    loss = 1.0 / (1 + step * 0.01)
    return LogLine(pod=f"bench-node-0-{rank}-abcde", rank=rank, time=now,
                   text=f"step={step} loss={loss:.6f} rank={rank} world={workers}", step=step, loss=loss)


async def _feed(app, report_fd: int, args, ingest) -> None:
    """Lines at a steady rate; tells the parent when the measured window starts and ends."""
    rate = args.rate
    profiler = None
    if args.profile_to:  # the measured window only, not the start-up
        import cProfile

        profiler = cProfile.Profile()
    start = time.perf_counter()
    fed = 0
    window = None  # (wall, cpu) at its start
    end = start + SETTLE_SECONDS + args.seconds
    while (now := time.perf_counter()) < end:
        if window is None and now - start >= SETTLE_SECONDS:
            window = (now, time.process_time())
            os.write(report_fd, b"start\n")
            if profiler is not None:
                profiler.enable()
        due = int((now - start) * rate) - fed
        if rate and due > 0:
            ingest([_line(args.workers, fed + k, time.time()) for k in range(due)])
            fed += due
        await asyncio.sleep(TICK if rate else 0.1)
    wall, cpu = time.perf_counter() - window[0], time.process_time() - window[1]
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile_to)
    os.write(report_fd, (json.dumps({"wall": wall, "cpu": cpu, "fed": fed}) + "\n").encode())
    app.exit()


async def _follow_job(app, report_fd: int, args) -> None:
    """The lesson's TrainJob on the embedded cluster, followed by the cockpit as it follows any
    job; the window starts once its lines flow and the job has settled."""
    from backend.lesson.jobs import apply_runtime_and_volume, lesson_trainjob
    from bench.tui_logs import screen_reports

    screen = app.screen
    await screen_reports(screen, lambda: screen.session.cluster is not None, timeout=120)
    cluster = screen.session.cluster
    await apply_runtime_and_volume(cluster)
    # long enough for the start, the settling and the window at the rate asked
    steps = int((JOB_SETTLE_SECONDS + args.seconds + 60) * args.rate / JOB_WORKERS)
    await cluster.apply(lesson_trainjob("bench-job", JOB_WORKERS, steps, step_delay=args.step_delay))
    buffer = screen.log_view.buffer
    await screen_reports(screen, lambda: screen.following.followed == "bench-job" and buffer.added > 0, timeout=180)
    await asyncio.sleep(JOB_SETTLE_SECONDS)
    start, cpu, lines = time.perf_counter(), time.process_time(), buffer.added
    os.write(report_fd, b"start\n")
    await asyncio.sleep(args.seconds)
    wall, cpu, lines = time.perf_counter() - start, time.process_time() - cpu, buffer.added - lines
    os.write(report_fd, (json.dumps({"wall": wall, "cpu": cpu, "fed": lines, "window_lines": lines}) + "\n").encode())
    await cluster.delete("TrainJob", "bench-job")
    app.exit()


def run_child(args) -> None:
    report_fd = args.report_fd
    if args.child == "baseline":
        from textual.app import App
        from textual.widgets import Log

        from tui.model.format import rank_label

        class Bare(App):
            def compose(self):
                yield Log(id="log")

            def on_ready(self) -> None:
                log = self.query_one(Log)

                def ingest(batch) -> None:
                    log.write_lines([f"{rank_label(line.rank)} {line.text}" for line in batch])

                self.run_worker(_feed(self, report_fd, args, ingest))

        Bare().run()
        return

    from backend.settings import Settings
    from bench.tui_logs import panels_mounted
    from tui.app import CockpitApp
    from tui.config import CockpitConfig
    from tui.launch import Launch

    class Fed(CockpitApp):
        async def on_ready(self) -> None:
            screen = self.screen
            await panels_mounted(screen)
            if args.child == "job":
                screen.action_show_tab("logs")  # as below: the costly tab at 80x24
                self.run_worker(_follow_job(self, report_fd, args))
                return
            # Following a job as the log stream worker would, without one (no job "bench" runs).
            screen.log_view.reset("bench")
            screen.loss_chart.follow_run("bench")
            screen.timeline.reset("bench")
            screen.action_show_tab("logs")  # the costly tab at 80x24; at 120x40 all is on one screen
            self.run_worker(_feed(self, report_fd, args, screen.following.log_batch))

    with tempfile.TemporaryDirectory(prefix="kfc-bench-") as home:
        app = Fed(Launch.of(Settings(home=Path(home)), CockpitConfig()))
        try:
            app.run()
        finally:
            from backend.local.embedded import Embedded

            asyncio.run(Embedded(Path(home)).down())


# ------------------------------------------------------------------ the parent


def measure(subject: str, size: tuple[int, int], rate: int, args, profile_to: str | None = None,
            workers: int | None = None) -> dict:
    """Runs one child on a fresh pty; returns bytes/s and CPU of its measured window."""
    command = [sys.executable, __file__, "--child", subject, "--rate", str(rate), "--seconds",
               str(args.seconds), "--workers", str(workers or args.workers),
               "--step-delay", str(args.step_delay)]
    if profile_to:
        command += ["--profile-to", profile_to]
    total, report = on_pty(command, size, timeout=(300 if subject == "job" else 60) + args.seconds, what=subject)
    if "window_lines" in report:  # a real job: the lines it printed in the window
        lines_per_s = report["window_lines"] / report["wall"]
    else:
        lines_per_s = report["fed"] / (SETTLE_SECONDS + report["wall"])
    return {"bytes_per_s": total / report["wall"], "cpu": report["cpu"] / report["wall"],
            "lines_per_s": lines_per_s}


def on_pty(command: list[str], size: tuple[int, int], timeout: float, what: str) -> tuple[int, dict]:
    """Runs `command` (given `--report-fd N` after it) on a fresh pty of `size`: (the bytes it wrote
    to the terminal between its `start` line on the report pipe and its report, the report: one
    JSON line)."""
    master, slave = pty.openpty()
    cols, rows = size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    report_r, report_w = os.pipe()
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", PYTHONPATH=str(ROOT))
    env.pop("NO_COLOR", None)
    child = subprocess.Popen([*command, "--report-fd", str(report_w)], stdin=slave, stdout=slave, stderr=slave,
                             env=env, pass_fds=(report_w,), start_new_session=True, cwd=ROOT)
    os.close(slave)
    os.close(report_w)
    selector = selectors.DefaultSelector()
    selector.register(master, selectors.EVENT_READ, "pty")
    selector.register(report_r, selectors.EVENT_READ, "report")
    counting, total, report, pending, seen = False, 0, None, b"", b""
    deadline = time.monotonic() + timeout
    try:
        while report is None and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1.0):
                if key.data == "pty":
                    try:
                        data = os.read(master, 65536)
                    except OSError:  # the child closed the terminal
                        data = b""
                    if counting:
                        total += len(data)
                    seen = (seen + data)[-20_000:]
                    if not data:
                        selector.unregister(master)
                else:
                    chunk = os.read(report_r, 4096)
                    if not chunk:
                        selector.unregister(report_r)
                        deadline = min(deadline, time.monotonic() + 2)  # ended: its last output, then out
                        continue
                    pending += chunk
                    while b"\n" in pending:
                        message, pending = pending.split(b"\n", 1)
                        if message == b"start":
                            counting = True
                        else:
                            report = json.loads(message)
        if report is None:
            tail = re.sub(rb"\x1b\[[0-9;?<>=$]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]", b"", seen)
            raise RuntimeError(f"{what}: no report (exit {child.poll()}); its terminal ended with:\n"
                               + tail.decode(errors="replace")[-3000:])
        # Drain until the child exits (its pidfd turns readable): it must not block on a full pty
        # while tearing down.
        drain_until_exit(child, selector, seconds=30)
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
        os.close(master)
        os.close(report_r)
    return total, report


def drain_until_exit(child: subprocess.Popen, selector: selectors.BaseSelector, seconds: float) -> None:
    """Read and drop whatever the child still writes (terminal, report pipe) until it exits or
    `seconds` pass."""
    pidfd = os.pidfd_open(child.pid)
    try:
        selector.register(pidfd, selectors.EVENT_READ, "exit")
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            for key, _ in selector.select(timeout=left):
                if key.data == "exit":
                    return
                try:
                    data = os.read(key.fd, 65536)
                except OSError:  # the child closed the terminal
                    data = b""
                if not data:
                    selector.unregister(key.fd)
    finally:
        selector.unregister(pidfd)
        os.close(pidfd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10,100", help="lines/s, comma-separated")
    parser.add_argument("--sizes", default="120x40,80x24")
    parser.add_argument("--seconds", type=float, default=5.0, help="the measured window")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--profile", type=int, metavar="RATE",
                        help="only profile the cockpit at this rate (cProfile, top functions printed)")
    parser.add_argument("--step-delay", type=float, default=0.008,
                        help="the job's --step-delay: about 100 lines/s with two workers on this machine")
    parser.add_argument("--job-only", action="store_true", help="only the real job and its baseline")
    parser.add_argument("--child", choices=("baseline", "idle", "cockpit", "job"), help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--report-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile-to", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help="keep the profile in this file")
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return 0
    sizes = [tuple(int(n) for n in s.split("x")) for s in args.sizes.split(",")]
    if args.profile:
        return profile(args, sizes[0])
    rates = [int(r) for r in args.rates.split(",")]
    print(f"terminal bytes and CPU while following logs: {args.seconds:.0f} s window after settling, "
          f"Textual's Linux driver on a pty; synthetic lines of {args.workers} workers, and the lesson's "
          f"TrainJob ({JOB_WORKERS} workers, --step-delay {args.step_delay}) on the embedded cluster")
    print(f"{'size':>7} {'subject':>9} {'lines/s':>8} {'kB/s':>8} {'x base':>7} {'CPU %':>6}")
    goal = None
    for size in sizes:
        label = f"{size[0]}x{size[1]}"
        if not args.job_only:
            _row(label, "idle", measure("cockpit", size, 0, args))
            for rate in rates:
                base = measure("baseline", size, rate, args)
                _row(label, "baseline", base)
                _row(label, "cockpit", measure("cockpit", size, rate, args), base)
        job = measure("job", size, GOAL_RATE, args)
        base = measure("baseline", size, max(1, round(job["lines_per_s"])), args, workers=JOB_WORKERS)
        _row(label, "baseline", base)
        _row(label, "job", job, base)
        if size == GOAL_SIZE:
            goal = job
    if goal is None:
        print(f"  (the goal is measured on the real job at {GOAL_SIZE[0]}x{GOAL_SIZE[1]})")
        return 0
    if goal["lines_per_s"] < 0.8 * GOAL_RATE:
        print(f"  NOT JUDGED  the job printed {goal['lines_per_s']:.0f} lines/s, not about {GOAL_RATE} (a busy "
              "machine paces it down): run again, or lower --step-delay")
        return 2
    ok = goal["bytes_per_s"] <= GOAL_BYTES_PER_SECOND
    print(f"  {'PASS' if ok else 'FAIL'}  <= {GOAL_BYTES_PER_SECOND // 1000} kB/s following the lesson's TrainJob at "
          f"{goal['lines_per_s']:.0f} lines/s, {GOAL_SIZE[0]}x{GOAL_SIZE[1]} ({goal['bytes_per_s'] / 1000:.1f} kB/s)")
    return 0 if ok else 1


def _row(size: str, subject: str, result: dict, base: dict | None = None) -> None:
    ratio = f"{result['bytes_per_s'] / base['bytes_per_s']:.2f}" if base and base["bytes_per_s"] else ""
    print(f"{size:>7} {subject:>9} {result['lines_per_s']:>8.0f} {result['bytes_per_s'] / 1000:>8.1f} "
          f"{ratio:>7} {result['cpu'] * 100:>6.1f}", flush=True)


def profile(args, size: tuple[int, int]) -> int:
    import pstats

    with tempfile.TemporaryDirectory(prefix="kfc-prof-") as tmp:
        out = args.profile_out or str(Path(tmp) / "cockpit.prof")
        result = measure("cockpit", size, args.profile, args, profile_to=out)
        print(f"cockpit at {args.profile} lines/s, {size[0]}x{size[1]}: {result['cpu'] * 100:.1f}% of a core, "
              f"{result['bytes_per_s'] / 1000:.1f} kB/s (under cProfile: slower than without)")
        stats = pstats.Stats(out)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
