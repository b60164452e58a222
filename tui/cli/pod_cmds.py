"""`kfcockpit pod freeze|thaw POD`: a hang to practise on. A frozen pod's processes are stopped, as a
frozen machine or a stuck kernel leaves a rank: its pod still Running, its peers blocked in their
collective, nothing reported by the platform until the collective timeout. The embedded cluster's
kubelet does it (annotation kfcockpit.io/frozen); other clusters have no such kubelet and say so."""

from __future__ import annotations

import argparse

from tui.cli.common import add_command, cluster_from

DESCRIPTION = """\
Stop (freeze) or continue (thaw) every process of a running worker pod on the embedded cluster,
to see what a hung rank looks like and how it is found:

  kfcockpit pod freeze lesson-ddp-node-0-1-abcde   # rank 1 stops; rank 0 waits on it
  kfcockpit goodput lesson-ddp                     # reports the hang once the silence is long
  kfcockpit pod thaw lesson-ddp-node-0-1-abcde     # the group goes on where it stopped

A frozen pod that is deleted is thawed first, so it still saves at SIGTERM. The cockpit's pods
panel has the same (F) and restarts a hung group (R)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "pod", help="freeze or thaw a worker pod (a hang to practise on)", description=DESCRIPTION)
    actions = p.add_subparsers(title="actions", metavar="ACTION", dest="pod_action", required=True)
    for verb, frozen, what in (("freeze", True, "stop every process of a running pod"),
                               ("thaw", False, "continue a frozen pod's processes")):
        action = add_command(actions, verb, help=what)
        action.add_argument("pod", metavar="POD")
        action.set_defaults(handler=cmd_freeze, frozen=frozen)


async def cmd_freeze(args: argparse.Namespace) -> int:
    await cluster_from(args).freeze_pod(args.pod, args.frozen)
    print(f"pod/{args.pod} {'frozen' if args.frozen else 'thawed'}")
    return 0
