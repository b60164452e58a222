"""`kfcockpit pod freeze|thaw POD`: a hang to practise on. A frozen pod's processes are stopped, as a
frozen machine or a stuck kernel leaves a rank: its pod still Running, its peers blocked in their
collective, nothing reported by the platform until the collective timeout. The embedded cluster's
kubelet does it (annotation kfcockpit.io/frozen); other clusters have no such kubelet and say so.
`kfcockpit pod slow POD --factor F`: a straggler the same way (annotation kfcockpit.io/slow)."""

from __future__ import annotations

import argparse

from tui.cli.common import add_command, cluster_from, fail

DESCRIPTION = """\
Stop (freeze) or continue (thaw) every process of a running worker pod on the embedded cluster,
to see what a hung rank looks like and how it is found:

  kfcockpit pod freeze lesson-ddp-node-0-1-abcde   # rank 1 stops; rank 0 waits on it
  kfcockpit goodput lesson-ddp                     # reports the hang once the silence is long
  kfcockpit pod thaw lesson-ddp-node-0-1-abcde     # the group goes on where it stopped

A frozen pod that is deleted is thawed first, so it still saves at SIGTERM. The cockpit's pods
panel has the same (F) and restarts a hung group (R).

Slow a pod: its processes compute at F times their speed (0 < F <= 1), a straggler the others wait
for in every all-reduce; the cockpit and `kfcockpit goodput` name it:

  kfcockpit pod slow lesson-ddp-node-0-1-abcde --factor 0.5
  kfcockpit pod slow lesson-ddp-node-0-1-abcde --factor 1    # full speed again"""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "pod", help="freeze, thaw or slow a worker pod (a hang or a straggler to practise on)",
                    description=DESCRIPTION)
    actions = p.add_subparsers(title="actions", metavar="ACTION", dest="pod_action", required=True)
    for verb, frozen, what in (("freeze", True, "stop every process of a running pod"),
                               ("thaw", False, "continue a frozen pod's processes")):
        action = add_command(actions, verb, help=what)
        action.add_argument("pod", metavar="POD")
        action.set_defaults(handler=cmd_freeze, frozen=frozen)
    action = add_command(actions, "slow", help="run a pod's processes at a factor of their speed (a straggler)")
    action.add_argument("pod", metavar="POD")
    action.add_argument("--factor", required=True, metavar="F",
                        help="the speed to run at, over 0 and up to 1 (0.5: half; 1: full speed again)")
    action.set_defaults(handler=cmd_slow)


async def cmd_freeze(args: argparse.Namespace) -> int:
    await cluster_from(args).freeze_pod(args.pod, args.frozen)
    print(f"pod/{args.pod} {'frozen' if args.frozen else 'thawed'}")
    return 0


async def cmd_slow(args: argparse.Namespace) -> int:
    try:
        factor = float(args.factor)
    except ValueError:
        factor = float("nan")
    if not 0 < factor <= 1:  # nan too
        return fail(f"--factor {args.factor}: a pod runs at a factor over 0 and up to 1 of its speed "
                    "(0.5: half; 1: full speed again)", exit_now=False)
    cluster = cluster_from(args)
    await cluster.slow_pod(args.pod, factor)
    if factor == 1:
        print(f"pod/{args.pod} at full speed again")
    else:
        print(f"pod/{args.pod} slowed to {factor:g}x its speed ({cluster.capabilities.slows_pods})")
    return 0
