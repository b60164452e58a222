"""The no-circles contract (tests/import_circles.py) that `make test` runs through lint-imports:
it finds a circle through a package's face and one through a TYPE_CHECKING import, which the
built-in acyclic_siblings contract misses, and the project has none it does not name."""

from __future__ import annotations

import sys
import textwrap

import grimp
import pytest

from tests.import_circles import NoCircles, circles


def _package(root, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))


@pytest.fixture
def toy(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m == "toy" or m.startswith("toy.")]:
        del sys.modules[name]


def test_a_package_that_imports_its_child_which_imports_it_back_is_a_circle(toy):
    _package(toy, {"toy/__init__.py": "", "toy/engine/__init__.py": "from toy.engine import parts\n",
                   "toy/engine/parts.py": "from toy import engine\n", "toy/plain.py": "import toy.engine.parts\n"})
    graph = grimp.build_graph("toy", exclude_type_checking_imports=False)
    assert circles(graph) == [["toy.engine", "toy.engine.parts"]]


def test_a_type_checking_import_closes_a_circle(toy):
    _package(toy, {"toy/__init__.py": "", "toy/screen.py": "from toy import part\n",
                   "toy/part.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy import screen\n"})
    assert circles(grimp.build_graph("toy", exclude_type_checking_imports=False)) == [["toy.part", "toy.screen"]]
    assert circles(grimp.build_graph("toy", exclude_type_checking_imports=True)) == []


def test_the_contract_fails_on_a_new_circle_and_on_a_stale_allowance(toy):
    _package(toy, {"toy/__init__.py": "", "toy/a.py": "import toy.b\n", "toy/b.py": "import toy.a\n"})
    graph = grimp.build_graph("toy", exclude_type_checking_imports=False)

    def check(allowed: list[str]):
        return NoCircles(name="c", session_options={"root_packages": ["toy"]},
                         contract_options={"allowed": allowed}).check(graph, verbose=False)

    assert not check([]).kept and check([]).metadata["new"] == [["toy.a", "toy.b"]]
    assert check(["toy.a"]).kept
    assert not check(["toy.a", "toy.gone"]).kept


def test_the_project_has_no_circle_but_the_one_its_contract_names():
    graph = grimp.build_graph("tui", "backend", "training", exclude_type_checking_imports=False)
    found = circles(graph)
    assert all("tui.screens.cockpit.screen" in circle for circle in found), found
    assert not [c for c in found if any(m.startswith("backend.local.registry") for m in c)]
