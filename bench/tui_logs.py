"""How many log lines a second the cockpit can show, and how fast it answers keys meanwhile.

Feeds N workers' lines at 10k and 100k lines/s for a few seconds into the headless cockpit, through
the same method the log stream worker calls, with the logs tab on screen (the costly case), and
measures:

- lines/s shown: lines handed to the Log widget per second (one write_lines per flush);
- key latency: a key posted to the app → its action running, p50/p99, while the lines pour in;
- retained bytes per line: memory held per buffered line once the buffer is full (tracemalloc);
- memory bound: the buffer holds `capacity` lines however many arrive.

Goals: >= 100k lines/s shown with p99 key latency <= 50 ms, <= 200 B per retained line.

    .venv/bin/python bench/tui_logs.py [--workers 4] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual import events  # noqa: E402
from textual.binding import Binding  # noqa: E402

from backend.models import LogLine  # noqa: E402
from backend.settings import Settings  # noqa: E402
from tui.app import CockpitApp  # noqa: E402
from tui.config import CockpitConfig  # noqa: E402
from tui.launch import Launch  # noqa: E402

TICK = 0.01  # the feeder delivers a batch every 10 ms, like a log stream does
PROBE_EVERY = 0.05


class ProbedApp(CockpitApp):
    """The cockpit plus one key whose action records how long the key waited in the queue."""

    BINDINGS = [Binding("f12", "probe", show=False)]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sent_at: float | None = None
        self.latencies: list[float] = []

    def action_probe(self) -> None:
        if self.sent_at is not None:
            self.latencies.append(time.perf_counter() - self.sent_at)
            self.sent_at = None


def line_pool(workers: int, size: int = 50_000) -> list[LogLine]:
    """Realistic step lines (what ranks print), made before timing starts."""
    pool = []
    for i in range(size):
        rank = i % workers
        step = i // workers
        loss = 1.0 / (1 + step * 0.01)
        pool.append(LogLine(pod=f"bench-node-0-{rank}-abcde", rank=rank, time=float(i),
                            text=f"step={step} loss={loss:.6f} rank={rank} world={workers}",
                            step=step, loss=loss))
    return pool


async def feed(app: ProbedApp, pool: list[LogLine], rate: int, seconds: float) -> dict:
    screen = app.screen
    view = screen.log_view
    per_tick = max(1, int(rate * TICK))
    shown_before = view.shown
    start = time.perf_counter()
    fed = 0
    next_probe = start
    index = 0
    while (now := time.perf_counter()) - start < seconds:
        due = int((now - start) * rate) - fed  # catch up if a tick was late: the offered rate holds
        if due > 0:
            batch = [pool[(index + k) % len(pool)] for k in range(min(due, per_tick * 5))]
            index += len(batch)
            fed += len(batch)
            screen.following.log_batch(batch)
        if now >= next_probe and app.sent_at is None:
            app.sent_at = time.perf_counter()
            app.post_message(events.Key("f12", None))
            next_probe = now + PROBE_EVERY
        await asyncio.sleep(TICK)
    elapsed = time.perf_counter() - start
    await all_lines_shown(screen)
    lat = sorted(app.latencies)
    app.latencies.clear()
    return {
        "offered": fed / elapsed,
        "shown": (view.shown - shown_before) / elapsed,
        "p50": statistics.median(lat) * 1000 if lat else float("nan"),
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else float("nan"),
        "probes": len(lat),
        "retained_lines": len(view.buffer),
        "log_lines": len(view.log_widget.lines),
    }


async def retained_bytes(app: ProbedApp, pool: list[LogLine]) -> tuple[float, float]:
    """(bytes held per buffered line, bytes grown per line once the buffer is full).

    Per line is the slope between a quarter-full and a full buffer, so the app's bounded caches
    (rendered strips, cell widths), which fill within the first screenful, are not charged to
    lines. Past capacity, memory must stop growing: the second figure is that growth."""
    screen = app.screen
    view = screen.log_view
    capacity = view.buffer.capacity
    view.reset("bench")
    fed = 0

    async def fill(until: int) -> int:
        nonlocal fed
        while fed < until:  # each batch in the Log widget before the next, as a stream's would be
            n = min(5000, until - fed)
            screen.following.log_batch([pool[(fed + k) % len(pool)] for k in range(n)])
            fed += n
            await all_lines_shown(screen)
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    quarter = await fill(capacity // 4)
    full = await fill(capacity)
    steady = await fill(3 * capacity)  # past capacity, then settled: Textual's bounded caches full
    over = await fill(5 * capacity)
    tracemalloc.stop()
    per_line = (full - quarter) / (capacity - capacity // 4)
    growth = (over - steady) / (2 * capacity)
    return per_line, growth


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--capacity", type=int, default=CockpitConfig().log_lines)
    args = parser.parse_args()
    pool = line_pool(args.workers)
    with tempfile.TemporaryDirectory(prefix="kfc-bench-") as home:
        config = CockpitConfig(log_lines=args.capacity)
        app = ProbedApp(Launch.of(Settings(home=Path(home)), config))
        async with app.run_test(size=(120, 40)) as pilot:
            await panels_mounted(app.screen)
            # The log view and the loss chart as when following a job, without a stream worker
            # (there is no job "bench" on the cluster to stream from).
            app.screen.log_view.reset("bench")
            app.screen.loss_chart.follow_run("bench")
            app.screen.action_show_tab("logs")
            await pilot.pause()
            results = {}
            for rate in (10_000, 100_000):
                results[rate] = await feed(app, pool, rate, args.seconds)
            per_line, growth = await retained_bytes(app, pool)
        await _stop_cluster(app)  # after the app: its watches would start a new controller
    print(f"cockpit log ingestion: {args.workers} workers, {args.seconds:.0f} s per rate, "
          f"buffer {args.capacity} lines, logs tab on screen (120x40)")
    print(f"{'offered/s':>10} {'shown/s':>10} {'key p50 ms':>11} {'key p99 ms':>11} {'probes':>7} "
          f"{'retained':>9}")
    for r in results.values():
        print(f"{r['offered']:>10.0f} {r['shown']:>10.0f} {r['p50']:>11.1f} {r['p99']:>11.1f} "
              f"{r['probes']:>7} {r['retained_lines']:>9}")
    print(f"retained bytes per buffered line: {per_line:.0f} B; growth per line past capacity: "
          f"{growth:.1f} B")
    top = results[100_000]
    goals = {
        ">= 100k lines/s shown": top["shown"] >= 100_000 * 0.98,
        "p99 key latency <= 50 ms at 100k lines/s": top["p99"] <= 50,
        "<= 200 B per retained line": per_line <= 200,
        "memory bounded (buffer == capacity, no growth past it)":
            top["retained_lines"] == args.capacity and top["log_lines"] <= args.capacity
            and growth < 0.05 * per_line,
    }
    for goal, ok in goals.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {goal}")
    return 0 if all(goals.values()) else 1


async def panels_mounted(screen) -> None:
    """The tabs are mounted just after the first paint; the screen says so on its signal."""
    await screen_reports(screen, lambda: screen.panels_ready)


async def all_lines_shown(screen) -> None:
    """Every line fed is in the Log widget: its last flush has run (the screen says "logs-shown")."""
    await screen_reports(screen, lambda: not screen.log_view.flush_pending)


async def screen_reports(screen, done: Callable[[], bool], timeout: float = 60.0) -> None:
    """Return once `done()` holds, checked again at each of the screen's `changed` signals."""
    if done():
        return
    happened = asyncio.Event()
    screen.changed.subscribe(screen, lambda _what: done() and happened.set(), immediate=True)
    try:
        await asyncio.wait_for(happened.wait(), timeout)
    finally:
        screen.changed.unsubscribe(screen)


async def _stop_cluster(app: CockpitApp) -> None:
    """The cockpit started the embedded cluster's controller in the temp home: stop it."""
    from backend.local.embedded import Embedded

    await Embedded(app.settings.home).down()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
