"""The cluster's nodes in the cockpit: the node and Event watches (open from the connection on,
whatever job is followed: a node failure is the cluster's, and the failure timeline narrates it
from them), the nodes view they feed (N), and what the learner does to a node.

- fail and restore: a node's machine lost, or back. No Kubernetes API does that (a lost machine is
  not a request), so only a platform that can (`Capabilities.fail_node`: the embedded cluster)
  offers it; on another, one line says so.
- cordon and uncordon: `kubectl cordon`'s patch of spec.unschedulable, on any cluster.
Each is asked first, naming the node and what follows, as a pod kill is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

from tui.model.live import keep_open
from tui.screens.cockpit.part import Part

if TYPE_CHECKING:
    from backend.models import ClusterEvent, NodeEvent, NodeSummary
    from tui.widgets.nodes_table import NodesPanel


class NodeActions(Part):
    @property
    def panel(self) -> "NodesPanel":
        return self.screen.panels.panel("nodes")

    # ------------------------------------------------------------------ the watches

    def watch(self) -> None:
        self.run(self._watch_nodes(), group="nodes", exclusive=True)
        self.run(self._watch_events(), group="events", exclusive=True)

    async def _watch_nodes(self) -> None:
        cluster = self.screen.session.cluster
        await keep_open(cluster.watch_nodes, self.node_changed, self._lost,
                        on_reopen=lambda: self.panel.table.reset())

    async def _watch_events(self) -> None:
        cluster = self.screen.session.cluster
        await keep_open(cluster.watch_events, self.event_seen, self._lost)

    def _lost(self, reason: str, delay: float) -> None:
        """Said in the nodes view's title, not the job bar's: the jobs may still be followed (a
        cluster whose RBAC lets this user list pods but not nodes)."""
        from textual.content import Content

        self.panel.border_title = Content(f"nodes · retry in {delay:.0f}s · {reason}")
        self.changed("nodes-lost")

    def node_changed(self, event: "NodeEvent") -> None:
        self.panel.border_title = "nodes"
        self.panel.apply(event)
        self.screen.timeline.model.node_seen(event.node, self.screen.clock())
        self.changed("nodes")

    def event_seen(self, event: "ClusterEvent") -> None:
        self.screen.timeline.model.event_seen(event, self.screen.clock())
        self.changed("events")

    # ------------------------------------------------------------------ the view and its keys

    def toggle_view(self) -> None:
        panels = self.screen.panels
        if panels.zoomed == "nodes":
            panels.toggle_zoom("nodes")
        else:
            panels.show("nodes")

    def _selected(self, key: str) -> "NodeSummary | None":
        """The node under the cursor of a shown nodes view; else the view is opened and None."""
        panels = self.screen.panels
        node = self.panel.table.selected if panels.is_shown("nodes") else None
        if node is None:
            panels.show("nodes")
            self.notify(f"pick a node in the nodes view, then {key}", severity="warning")
        return node

    def ask_fail(self) -> None:
        fail = self._able("fail_node", "fail a node's machine")
        node = self._selected("x") if fail is not None else None
        if node is not None:
            self._ask(f"Fail node {node.name}?",
                      f"Its machine is lost: the processes of its {node.pods} pod(s) end at once and its kubelet "
                      "stops posting status. The node lifecycle controller marks it Ready Unknown after its grace "
                      "period and taints it unreachable; its pods are evicted and the job restarts elsewhere.",
                      "Fail", lambda: fail(node.name), "fault injected")

    def ask_restore(self) -> None:
        restore = self._able("restore_node", "restore a node's machine")
        node = self._selected("u") if restore is not None else None
        if node is not None:
            self._ask(f"Restore node {node.name}?",
                      "Its machine is back: its kubelet registers it Ready again and the node lifecycle "
                      "controller takes its taints off.", "Restore", lambda: restore(node.name), "nodes")

    def ask_cordon(self) -> None:
        cluster = self.screen.session.cluster
        node = self._selected("C") if self._connected() else None
        if node is None:
            return
        cordon = not node.unschedulable
        verb = "cordon" if cordon else "uncordon"
        why = ("New pods are kept off it (spec.unschedulable, the node.kubernetes.io/unschedulable taint); "
               "the pods on it keep running (kubectl drain would evict them)." if cordon
               else "The scheduler may place new pods on it again.")

        async def act() -> str:
            await cluster.cordon_node(node.name, cordon)
            return f"node {node.name} {verb}ed"

        self._ask(f"{verb.capitalize()} node {node.name}?", why, verb.capitalize(), act, "nodes")

    def _able(self, capability: str, what: str) -> Callable[[str], Awaitable[str]] | None:
        """The platform's way to do it, or None after one line saying it has none."""
        if not self._connected():
            return None
        able = self.screen.session.cluster.capabilities
        act = getattr(able, capability)
        if act is None:
            self.notify(f"{able.description} cannot {what}: a lost machine is no API request; cordon (C) "
                        "and kubectl drain work on any cluster", severity="warning")
        return act

    def _connected(self) -> bool:
        if self.screen.session.cluster is None:
            self.notify("still connecting to the cluster", severity="warning")
            return False
        return True

    def _ask(self, question: str, detail: str, yes: str, act: Callable[[], Awaitable[str]], title: str) -> None:
        from tui.screens.confirm import ConfirmScreen

        async def run() -> None:
            said = await self.call(question.rstrip("?").lower(), act())
            if said is not None:
                self.notify(said, title=title)
                self.changed("node-action")

        self.screen.app.push_screen(ConfirmScreen(question, detail, yes=yes),
                                    lambda confirmed: self.run(run(), group="node-action") if confirmed else None)
