"""The nodes view (N) at 80x24, fed through the screen's real node and Event watches from a scripted
cluster: a row per node with Ready, cordoned, GPUs used of allocatable, CPU and memory requested
of allocatable, and pods; the selected node's Ready reason and taints under it. On the selected
node x fails and u restores its machine where the platform can (Capabilities.fail_node /
restore_node), C cordons and uncordons it on any cluster (kubectl cordon's spec.unschedulable),
each asked first; a platform that cannot fail a node says so in one line, asking nothing."""

from __future__ import annotations

from dataclasses import replace

from backend.models import NodeEvent, NodeSummary, PodEventType, Taint
from tests.tui.conftest import wait_until
from tests.tui.scripted import T0, scripted_app

GiB = 2**30
UNREACHABLE = Taint(key="node.kubernetes.io/unreachable", effect="NoExecute", added=T0 + 5)


def node(name: str, **changes) -> NodeSummary:
    base = NodeSummary(name=name, ready="True", ready_reason="KubeletReady", gpus=2, cpu=8.0, memory=16 * GiB,
                       max_pods=110, gpus_used=1, cpu_requested=1.5, memory_requested=2 * GiB, pods=2)
    return base.model_copy(update=changes)


def added(summary: NodeSummary, kind: PodEventType = PodEventType.ADDED) -> NodeEvent:
    return NodeEvent(type=kind, node=summary)


async def open_nodes(app, cluster, pilot) -> object:
    screen = app.screen
    await wait_until(screen, lambda: screen.following.followed is not None, "the cockpit to connect")
    for name in ("kfcockpit-worker", "kfcockpit-worker2"):
        cluster.nodes.put_nowait(added(node(name)))
    await wait_until(screen, lambda: len(screen.panels.panel("nodes").table.nodes) == 2, "both nodes listed")
    await pilot.press("N")
    await wait_until(screen, lambda: screen.panels.is_shown("nodes"), "the nodes view")
    return screen


def footer_keys(screen) -> set[str]:
    return {b.binding.action for b in screen.active_bindings.values() if b.binding.show and b.enabled}


async def test_the_nodes_view_fits_80x24_and_its_keys_ask_first(home):
    app, cluster, now = scripted_app(home)
    fails, restores = [], []

    async def fail(name: str) -> str:
        fails.append(name)
        return f"node {name} failed"

    async def restore(name: str) -> str:
        restores.append(name)
        return f"node {name} restored"

    cluster.capabilities = replace(cluster.capabilities, fail_node=fail, restore_node=restore)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_nodes(app, cluster, pilot)
        panel = screen.panels.panel("nodes")
        # the view fills the body: the checklist and the tabs give way, every column whole
        assert not screen.checklist.display and panel.outer_size.width == 80
        table = panel.table
        assert table.virtual_size.width <= table.size.width, "the nodes table is cut at 80 columns"
        row = [str(cell) for cell in table.get_row("kfcockpit-worker2")]
        assert row == ["kfcockpit-worker2", "True", "-", "1/2", "1.50/8.00", "2.0Gi/16Gi", "2/110"], row
        # the footer offers the view's keys (and leaves the followed job's to the other panels)
        assert {"fail_node", "restore_node", "cordon_node", "toggle_nodes"} <= footer_keys(screen)
        assert "kill_pod" not in footer_keys(screen)

        table.move_cursor(row=table.get_row_index("kfcockpit-worker2"))
        await pilot.press("x")
        await wait_until(screen, lambda: app.screen is not screen, "the failure to be asked first")
        assert "Fail node kfcockpit-worker2?" in str(app.screen.query_one("#question").render())
        await pilot.press("n")  # cancelled: nothing happens
        await pilot.pause()
        assert fails == []
        await pilot.press("x")
        await wait_until(screen, lambda: app.screen is not screen, "asked again")
        await pilot.press("y")
        await wait_until(screen, lambda: fails == ["kfcockpit-worker2"], "the node failed")

        # what the cluster then says: Ready Unknown, the unreachable taint (shown under the table)
        cluster.nodes.put_nowait(added(node("kfcockpit-worker2", ready="Unknown", ready_reason="NodeStatusUnknown",
                                            ready_message="Kubelet stopped posting node status.",
                                            taints=[UNREACHABLE]), PodEventType.MODIFIED))
        await wait_until(screen, lambda: table.nodes["kfcockpit-worker2"].ready == "Unknown", "the node Unknown")
        assert str(table.get_row("kfcockpit-worker2")[1]) == "Unknown"
        shown = str(panel.query_one("#node-detail").render())
        assert "Ready Unknown (NodeStatusUnknown): Kubelet stopped posting node status." in shown, shown
        assert "node.kubernetes.io/unreachable:NoExecute" in shown, shown

        await pilot.press("u")
        await wait_until(screen, lambda: app.screen is not screen, "the restore to be asked first")
        await pilot.press("y")
        await wait_until(screen, lambda: restores == ["kfcockpit-worker2"], "the node restored")

        await pilot.press("C")
        await wait_until(screen, lambda: app.screen is not screen, "the cordon to be asked first")
        assert "Cordon node kfcockpit-worker2?" in str(app.screen.query_one("#question").render())
        await pilot.press("y")
        await wait_until(screen, lambda: cluster.cordoned == [("kfcockpit-worker2", True)], "the node cordoned")
        cluster.nodes.put_nowait(added(node("kfcockpit-worker2", unschedulable=True), PodEventType.MODIFIED))
        await wait_until(screen, lambda: table.nodes["kfcockpit-worker2"].unschedulable, "the node shown cordoned")
        assert str(table.get_row("kfcockpit-worker2")[2]) == "cordoned"
        await pilot.press("C")  # a cordoned node is uncordoned
        await wait_until(screen, lambda: app.screen is not screen, "the uncordon to be asked first")
        assert "Uncordon node kfcockpit-worker2?" in str(app.screen.query_one("#question").render())
        await pilot.press("y")
        await wait_until(screen, lambda: cluster.cordoned[-1] == ("kfcockpit-worker2", False), "uncordoned")

        await pilot.press("N")  # closed: back to the panels, the node keys gone from the footer
        await wait_until(screen, lambda: not screen.panels.is_shown("nodes"), "the nodes view closed")
        assert screen.checklist.display and "fail_node" not in footer_keys(screen)


async def test_a_cluster_that_cannot_fail_a_node_says_so_and_asks_nothing(home):
    app, cluster, now = scripted_app(home)  # the scripted cluster advertises no fail_node
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_nodes(app, cluster, pilot)
        for key in ("x", "u"):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is screen, f"{key} asked about a node the cluster cannot fail"
        said = [n.message for n in app._notifications]
        assert sum("cannot fail a node's machine" in m for m in said) == 1, said
        assert sum("cannot restore a node's machine" in m for m in said) == 1, said
        # outside the nodes view, the node keys do nothing at all
        await pilot.press("N")
        await wait_until(screen, lambda: not screen.panels.is_shown("nodes"), "the nodes view closed")
        await pilot.press("x")
        await pilot.pause()
        assert app.screen is screen and len(app._notifications) == len(said)
