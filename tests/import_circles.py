"""An import-linter contract that finds every import circle of the project: any modules that reach
each other through imports, TYPE_CHECKING imports counted and a package's `__init__` an import
like any other (a package that imports its child which imports it back is a circle). The built-in
`acyclic_siblings` sees neither a circle through a package's face nor one across folders.

    [tool.importlinter] contract_types = ["no_circles: tests.import_circles.NoCircles"]

`allowed` names circles still to be undone (by one module of each); a circle not named fails
`make test`, and so does a named one that has gone (the list stays true)."""

from __future__ import annotations

from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def circles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative:
    the graph is deep), each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


class NoCircles(Contract):
    allowed = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph, verbose: bool) -> ContractCheck:
        allowed = set(self.allowed or [])  # type: ignore[arg-type]
        found = circles(graph)
        named = {name for name in allowed for circle in found if name in circle}
        new = [circle for circle in found if not allowed & set(circle)]
        gone = sorted(allowed - named)
        return ContractCheck(kept=not new and not gone, warnings=[],
                             metadata={"new": new, "gone": gone})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for circle in check.metadata["new"]:
            output.print_error(f"an import circle: {' <-> '.join(circle)}")
        for name in check.metadata["gone"]:
            output.print_error(f"{name} is allowed a circle it no longer has: take it off the contract's list")
