"""How `make test` splits the suite between two pytest-xdist workers (`--dist loadgroup`).

A module- or session-scoped fixture is made once per worker that runs a test using it, so tests
sharing one go to one worker: every module is a group of its own, except the directories whose
conftest holds session fixtures (an embedded cluster, a measured Ray comparison), which are one
group each. Each test makes its own state root, and every "no process left" check looks for that
root's processes only, so the other worker's clusters, pods and Ray runs are not seen."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# directories whose tests share session-scoped fixtures (see their conftest.py)
SESSION_SHARED = ("conformance", "ray")


def xdist_group(path: Path) -> str:
    relative = path.resolve().relative_to(TESTS)
    if relative.parts[0] in SESSION_SHARED:
        return relative.parts[0]
    return relative.as_posix()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group(item.path)))
