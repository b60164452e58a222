"""How `make test` splits the suite between two pytest-xdist workers (`--dist loadgroup`).

A module- or session-scoped fixture is made once per worker that runs a test using it, so tests
sharing one go to one worker: every module is a group of its own, except the directories whose
conftest holds session fixtures (an embedded cluster, a measured Ray comparison), which are one
group each. Each test makes its own state root, and every "no process left" check looks for that
root's processes only, so the other worker's clusters, pods and Ray runs are not seen.

The longest groups are handed out first (`HEAVIEST_FIRST`, with xdist's own reordering by test
count turned off in the Makefile): given out by test count, the one-test lesson walk came last,
and the suite ended with one worker running it for minutes while the other sat idle."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# directories whose tests share session-scoped fixtures (see their conftest.py)
SESSION_SHARED = ("conformance", "ray")
# Groups of 40 s or more of test time (`make test PYTEST_ARGS=--durations=0`, summed per group),
# longest first; every other group follows in collection order, the short ones filling the end.
HEAVIEST_FIRST = ("lesson/test_lesson_in_cockpit.py", "ray", "local/test_rayjobs.py", "local/test_controller.py",
                  "training/test_ddp_processes.py", "conformance", "local/test_jobs.py", "local/test_chaos.py",
                  "e2e/test_pipelines.py", "local/test_node_failure.py", "tui/test_snapshots.py")


def xdist_group(path: Path) -> str:
    relative = path.resolve().relative_to(TESTS)
    if relative.parts[0] in SESSION_SHARED:
        return relative.parts[0]
    return relative.as_posix()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    groups = {item: xdist_group(item.path) for item in items}
    for item, group in groups.items():
        item.add_marker(pytest.mark.xdist_group(group))
    first = {group: place for place, group in enumerate(HEAVIEST_FIRST)}
    items.sort(key=lambda item: first.get(groups[item], len(first)))  # stable: the rest keep their order
