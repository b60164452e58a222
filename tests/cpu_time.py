"""`make test PYTEST_ARGS=--cpu-time`: what each test costs in CPU, its processes included.

The suite's time is real processes (torchrun workers, controllers, Ray's daemons), most of them
not the test's children by the time they are reaped, so `time` and the rusage of pytest miss them.
A cgroup sees them all: each xdist worker moves itself into a cpuacct (v1) or cpu (v2) cgroup of
its own, which everything it starts inherits, and each test's report carries the CPU seconds the
cgroup used during it. At the end the controller prints the total against the wall time, and the
groups (tests/conftest.py's `xdist_group`) and the tests that cost the most: where a new
real-process test would rather share a cluster or a Ray runtime than start its own.

Needs a cgroup this process may make (root, or a delegated v2 subtree); where it may not, the
option says so once and measures nothing.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

KEY = "cpu_seconds"


class _Meter:
    """This worker's cgroup and its CPU counter, in seconds."""

    def __init__(self, directory: Path, counter: str) -> None:
        self.directory, self.counter = directory, counter

    @classmethod
    def make(cls, name: str) -> _Meter | str:
        """A cgroup named `name` under this process's own, with this process in it; or why not."""
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            v1 = "cpuacct" in controllers.split(",")
            if v1 or (number == "0" and not controllers):
                base = Path("/sys/fs/cgroup/cpuacct" if v1 else "/sys/fs/cgroup") / path.lstrip("/")
                directory = base / name
                try:
                    directory.mkdir(exist_ok=True)
                    (directory / "cgroup.procs").write_text(str(os.getpid()))
                except OSError as exc:
                    return f"no cgroup of its own here ({exc.strerror}: {directory})"
                return cls(directory, "cpuacct.usage" if v1 else "cpu.stat")
        return "no cpuacct or unified cgroup hierarchy here"

    def close(self) -> None:
        """Back into the parent cgroup, and this one removed (kept if a process still runs in it)."""
        try:
            (self.directory.parent / "cgroup.procs").write_text(str(os.getpid()))
            self.directory.rmdir()
        except OSError:
            pass

    def seconds(self) -> float:
        text = (self.directory / self.counter).read_text()
        if self.counter == "cpuacct.usage":
            return int(text) / 1e9
        return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6


class CpuTime:
    """The plugin: per test on the workers, summed per group on the controller."""

    def __init__(self, group_of) -> None:
        self.group_of = group_of  # node id -> its group
        self.meter: _Meter | None = None
        self.started = 0.0
        self.by_group: dict[str, float] = defaultdict(float)
        self.by_test: dict[str, float] = {}
        self.wall_start = time.monotonic()
        self.problem = ""

    def pytest_configure(self, config: pytest.Config) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        made = _Meter.make(f"kfcockpit-tests-{os.getpid()}-{worker}")
        if isinstance(made, str):
            self.problem = made
        else:
            self.meter = made

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.meter is not None:
            self.meter.close()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        self.started = self.meter.seconds() if self.meter else 0.0
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        if self.meter is not None and call.when == "teardown":  # the module's fixtures ended too
            item.user_properties.append((KEY, self.meter.seconds() - self.started))
        yield

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == KEY and report.when == "teardown":
                self.by_group[self.group_of(report.nodeid)] += value
                self.by_test[report.nodeid.split("@")[0]] = value

    def pytest_terminal_summary(self, terminalreporter) -> None:
        write = terminalreporter.write_line
        if not self.by_group:
            write(f"cpu time: not measured ({self.problem or 'no test reported it'})")
            return
        total, wall = sum(self.by_group.values()), time.monotonic() - self.wall_start
        write(f"cpu time: {total:.0f} CPU seconds in {wall:.0f} s of wall time "
              f"({total / wall:.2f} of this machine's {os.cpu_count()} cores)")
        for group, seconds in sorted(self.by_group.items(), key=lambda kv: -kv[1])[:15]:
            write(f"  {seconds:7.1f} s  {group}")
        write("the costliest tests (a module-scoped fixture counts for the test that made it):")
        for test, seconds in sorted(self.by_test.items(), key=lambda kv: -kv[1])[:25]:
            write(f"  {seconds:7.1f} s  {test}")
