"""The nodes view's table: one row per Node of the cluster, as `kubectl get nodes` and `kubectl
describe node` tell it, updated from the node watch (the screen hands each NodeEvent to `apply`):
whether it is Ready (the Ready condition's status: True, False or Unknown), cordoned, and what
the unfinished pods bound to it request against what it offers: GPUs (nvidia.com/gpu), CPU,
memory, pods. Below the table, the selected node's Ready reason and taints, which say why a node
takes no pods (a lost node's `node.kubernetes.io/unreachable`, a cordoned one's
`unschedulable`). Nothing here asks the cluster: the model is `nodes`, the rows are drawn from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from tui.model import format as fmt
from tui.widgets.keyed_table import KeyedTable

if TYPE_CHECKING:
    from backend.models import NodeEvent, NodeSummary

# (key, header, width): the node's whole name (no pod column competes for the width here); CPU
# and memory are two of tui/format's at most 4 and 5 cells: kfcockpit's names fit 80 columns.
COLUMNS = (
    ("node", "NODE", None),
    ("ready", "READY", 7),
    ("cordon", "CORDON", 8),
    ("gpu", "GPU", 5),
    ("cpu", "CPU", 9),
    ("mem", "MEM", 11),
    ("pods", "PODS", 7),
)
READY_STYLE = {"True": "bold green", "False": "bold red", "Unknown": "bold magenta"}


class NodesTable(KeyedTable):

    def __init__(self, **kwargs) -> None:
        super().__init__(COLUMNS, **kwargs)
        self.nodes: dict[str, "NodeSummary"] = {}

    def apply(self, event: "NodeEvent") -> None:
        if event.type.value == "DELETED":
            self.nodes.pop(event.node.name, None)
        else:
            self.nodes[event.node.name] = event.node
        self.sync({name: _cells(self.nodes[name]) for name in sorted(self.nodes)})

    def reset(self) -> None:
        """The watch opens again and lists every node anew."""
        self.nodes.clear()
        self.sync({})

    @property
    def selected(self) -> "NodeSummary | None":
        key = self.selected_key
        return self.nodes.get(key) if key is not None else None


def _cells(node: "NodeSummary") -> tuple:
    return (
        node.name,
        Text(node.ready, style=READY_STYLE.get(node.ready, "")),
        Text("cordoned", style="bold yellow") if node.unschedulable else Text("-", style="dim"),
        f"{node.gpus_used}/{node.gpus}" if node.gpus else "-",
        f"{fmt.cpu(node.cpu_requested)}/{fmt.cpu(node.cpu)}",
        f"{fmt.memory(node.memory_requested)}/{fmt.memory(node.memory)}",
        f"{node.pods}/{node.max_pods}",
    )


def detail(node: "NodeSummary | None") -> Content:
    """The selected node's Ready condition (status, reason, message) and taints, plain text: all
    of it is the cluster's."""
    if node is None:
        return Content("no node selected")
    ready = f"Ready {node.ready}" + (f" ({node.ready_reason})" if node.ready_reason else "")
    message = f": {node.ready_message}" if node.ready_message and node.ready != "True" else ""
    taints = ", ".join(t.text for t in node.taints) or "none"
    return Content(f"{node.name} · {ready}{message}\ntaints: {taints}")


class NodesPanel(Vertical):
    """The table and, under it, what the selected row says in full."""

    def compose(self) -> ComposeResult:
        yield NodesTable(id="nodes-table")
        yield Static(id="node-detail", markup=False)

    @property
    def table(self) -> NodesTable:
        return self.query_one(NodesTable)

    def apply(self, event: "NodeEvent") -> None:
        self.table.apply(event)
        self.show_detail()

    def show_detail(self) -> None:
        self.query_one("#node-detail", Static).update(detail(self.table.selected))

    def on_data_table_row_highlighted(self) -> None:
        self.show_detail()
