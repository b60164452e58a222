"""Rerun chosen tests N times and report every test that ever failed, with counts: the way to
catch a test that fails at random before it blocks a landing (`make flaky`, see the Makefile).

    python -m tests.flaky --runs 20 tests/local tests/ray/test_ray_train.py::test_x [-- PYTEST_ARGS]

Each run is a fresh pytest process, not a repeat inside one: session fixtures (an embedded
cluster, a measured Ray run) are made again every time, which is where the random failures of
tests that start real processes come from. A run's outcomes come from its JUnit XML, its output is
kept beside it for the failures' tracebacks. Exit status: 0 when every run passed, 1 when a test
failed in some run, 2 when a run broke (pytest interrupted or crashed: no outcomes to count).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_BROKEN = {2: "interrupted", 3: "pytest internal error", 4: "usage error", 5: "no tests collected"}


@dataclass
class Tally:
    runs: int = 0
    broken: list[str] = field(default_factory=list)  # "run 3: interrupted"
    failed: Counter[str] = field(default_factory=Counter)  # node id -> runs it failed in
    first_failure: dict[str, tuple[int, str]] = field(default_factory=dict)  # node id -> (run, message)


def outcomes(junit: Path) -> tuple[int, dict[str, str]]:
    """(tests run, {node id: first line of the failure or error}) from one run's JUnit XML
    (`junit_family=xunit1`, whose testcases name their file)."""
    tests, failed = 0, {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tests += 1
        node = node_id(case.get("file", ""), case.get("classname", ""), case.get("name", ""))
        for problem in (*case.findall("failure"), *case.findall("error")):
            message = (problem.get("message") or problem.text or "").strip().splitlines()
            failed.setdefault(node, f"{problem.tag}: {message[0] if message else '(no message)'}")
    return tests, failed


def node_id(file: str, classname: str, name: str) -> str:
    """pytest's node id from a testcase's attributes: the classname is the module's dotted path
    followed by any test classes."""
    module = file.removesuffix(".py").replace("/", ".")
    classes = classname[len(module) + 1:].split(".") if classname.startswith(module + ".") else []
    return "::".join([file, *classes, name]) if file else f"{classname}::{name}"


def run_once(index: int, tests: list[str], pytest_args: list[str], logs: Path, tally: Tally) -> bool:
    """One pytest run; False when it broke in a way that repeating cannot mend."""
    junit, log = logs / f"run-{index}.xml", logs / f"run-{index}.log"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
           f"--junitxml={junit}", *pytest_args, *tests]
    began = time.monotonic()
    with open(log, "wb") as out:
        code = subprocess.run(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - began
    tally.runs += 1
    if code not in (0, 1) or not junit.exists():
        tally.broken.append(f"run {index}: {_BROKEN.get(code, f'exit status {code}')} (log: {log})")
        print(f"run {index}: broke, {_BROKEN.get(code, f'exit status {code}')} in {seconds:.0f} s", flush=True)
        return code not in (4, 5)
    ran, failed = outcomes(junit)
    for node, message in failed.items():
        tally.failed[node] += 1
        tally.first_failure.setdefault(node, (index, message))
    said = f", failed: {' '.join(sorted(failed))}" if failed else ""
    print(f"run {index}: {ran} tests, {len(failed)} failed in {seconds:.0f} s{said}", flush=True)
    return True


def report(tally: Tally, logs: Path) -> int:
    print(f"\n{tally.runs} runs")
    for line in tally.broken:
        print(f"BROKEN {line}")
    for node, count in tally.failed.most_common():
        run, message = tally.first_failure[node]
        label = "FAILING" if count == tally.runs else "FLAKY"  # every run, or only some
        print(f"{label} {node}: failed {count}/{tally.runs} (first in run {run}: {message[:200]})")
    if tally.failed or tally.broken:
        print(f"outputs and JUnit files: {logs}")
        return 1 if not tally.broken else 2
    print("every test passed in every run")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog="python -m tests.flaky", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="how many times to run them (default %(default)s)")
    parser.add_argument("tests", nargs="*", help="test files, directories or node ids, as pytest takes them")
    args = parser.parse_args(ours)
    if not args.tests:
        parser.error('name the tests to rerun, e.g. make flaky TESTS="tests/local tests/x.py::test_y" N=20')
    if args.runs < 1:
        parser.error(f"--runs must be 1 or more, got {args.runs}")
    logs = Path(tempfile.mkdtemp(prefix="kfc-flaky-"))
    tally = Tally()
    for index in range(1, args.runs + 1):
        if not run_once(index, args.tests, pytest_args, logs, tally):
            break
    return report(tally, logs)


if __name__ == "__main__":
    sys.exit(main())
