"""What kubectl does not do, on the current platform: `cluster up|down|status|kubeconfig`, `node
fail|restore` (the embedded cluster's machines), merged `logs` that follow replacement pods,
`checkpoints` on a volume, `snapshot`. They speak only the Cluster protocol, so each works on the
embedded local cluster (default) and on Kubernetes (--backend kube); `cluster up|down|kubeconfig`
and `node` manage the embedded cluster. Declaring, listing, deleting and waiting are kubectl's:
`apply`, `get`, `delete`, `wait` and `kill` only say so."""

from __future__ import annotations

import argparse
import os
import sys
import time

from backend.words import count
from tui.cli.common import (
    EXIT_FAILED,
    add_command,
    add_output_option,
    cluster_from,
    fail,
    print_json,
    print_table,
    settings_from,
)

CLUSTER_DESCRIPTION = """\
The embedded local cluster's controller: one detached process per state root that runs the
worker pods and serves the API. Other commands start it on demand; `up` starts it now (and warms
the workers: torch imported once), `down` stops it and every pod, `status` shows what runs and
`kubeconfig` prints the file kubectl needs: export KUBECONFIG=$(kfcockpit cluster kubeconfig)."""

NODE_DESCRIPTION = """\
What a machine does to one of the embedded cluster's nodes, which no Kubernetes API does (a lost
machine is not a request): `fail` ends every process of the node's pods at once and stops its
kubelet; `restore` brings the machine back and its kubelet registers the node Ready again. What
follows a failure is the control plane's (the node lifecycle controller, the taint eviction, the
JobSet's failure policy), seen with kubectl; `kubectl cordon/drain` move work off a node that is up."""


# What kfcockpit once did and kubectl does on every cluster: the kubectl command that replaces it.
KUBECTL_DOES = {"apply": "kubectl apply", "get": "kubectl get", "delete": "kubectl delete",
                "wait": "kubectl wait", "kill": "kubectl delete pod"}


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "cluster", help="start, stop or inspect the embedded local cluster",
                    description=CLUSTER_DESCRIPTION)
    actions = p.add_subparsers(title="actions", metavar="ACTION", dest="cluster_action", required=True)
    up = add_command(actions, "up", help="start the controller (if needed) and warm the workers")
    up.add_argument("--nodes", type=int, metavar="N",
                    help="how many nodes (as kind's worker nodes; default 2, the lesson's); kept for later starts")
    up.add_argument("--gpus-per-node", metavar="G|auto",
                    help="each node's nvidia.com/gpu: this machine's GPUs shared out (auto, the default), or G "
                         "per node (simulated where the machine has fewer: pods train on CPU)")
    up.add_argument("--cpus", type=_positive_quantity, metavar="N",
                    help="each node's allocatable CPUs (default: this machine's); kept for later starts")
    up.add_argument("--memory", type=_positive_quantity, metavar="QTY",
                    help="each node's allocatable memory, which its pods together never exceed, e.g. 8Gi "
                         "(default: this machine's, less a quarter (at least 1Gi) kept for the rest of it)")
    up.add_argument("--max-pods", type=_positive_int, metavar="N",
                    help="the pods a node holds, as the kubelet's --max-pods (default 110); kept for later starts")
    up.add_argument("--pod-max-pids", type=_positive_int, metavar="N",
                    help="processes and threads a pod may run, as the kubelet's --pod-max-pids (default 1024); "
                         "kept for later starts")
    up.add_argument("--node-monitor-grace-period", metavar="DURATION",
                    help="kube-controller-manager's: a node silent this long is Ready Unknown (upstream 50s; "
                         "the lesson's cluster 4s)")
    up.add_argument("--default-unreachable-toleration-seconds", type=int, metavar="S",
                    help="kube-apiserver's: how long pods stay on an unreachable node (upstream 300; the lesson's 2)")
    up.add_argument("--default-not-ready-toleration-seconds", type=int, metavar="S",
                    help="kube-apiserver's: how long pods stay on a not-ready node (upstream 300; the lesson's 2)")
    up.add_argument("--forceful-termination-grace-period", metavar="DURATION",
                    help="Kueue's failure recovery: a pod stuck Terminating on an unreachable node is failed and "
                         "removed this long after its deletion time (upstream 1m; the lesson's 1s)")
    up.set_defaults(handler=cmd_up)
    add_command(actions, "down", help="stop the controller and every pod").set_defaults(handler=cmd_down)
    add_command(actions, "kubeconfig", help="start the cluster if needed and print its kubeconfig's path",
                description="Print the path of the embedded cluster's kubeconfig (context kfcockpit, namespace "
                            "default), starting the cluster if it is not running, so that\n\n"
                            "  export KUBECONFIG=$(kfcockpit cluster kubeconfig)\n\n"
                            "points kubectl and every Kubernetes client at it. ~/.kube/config is never "
                            "touched.").set_defaults(handler=cmd_kubeconfig)
    status = add_command(actions, "status", help="controller, runtime, volume, snapshots: what is ready")
    add_output_option(status)
    status.set_defaults(handler=cmd_status)

    p = add_command(sub, "node", help="fail or restore a node of the embedded cluster (as a lost machine)",
                    description=NODE_DESCRIPTION)
    actions = p.add_subparsers(title="actions", metavar="ACTION", dest="node_action", required=True)
    for action, text in (("fail", "the node's machine is lost: every process on it ends at once"),
                         ("restore", "the node's machine is back: its kubelet registers it Ready again")):
        parser = add_command(actions, action, help=text)
        parser.add_argument("node", metavar="NODE")
        parser.set_defaults(handler=cmd_node, node_action=action)

    p = add_command(sub, "logs", help="every worker's lines of a job, merged (stern style)")
    p.add_argument("job", metavar="JOB")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep following, replacement pods included, until the job finishes")
    p.set_defaults(handler=cmd_logs)

    p = add_command(sub, "checkpoints", help="checkpoint files on a volume, each checked against its checksum")
    p.add_argument("volume", metavar="VOLUME")
    add_output_option(p)
    p.set_defaults(handler=cmd_checkpoints)

    p = add_command(sub, "snapshot", help="snapshot a volume, list snapshots")
    actions = p.add_subparsers(title="actions", metavar="ACTION", dest="snapshot_action", required=True)
    create = add_command(actions, "create", help="snapshot VOLUME as NAME")
    create.add_argument("volume", metavar="VOLUME")
    create.add_argument("name", metavar="NAME")
    create.set_defaults(handler=cmd_snapshot_create)
    listing = add_command(actions, "list", help="snapshots with the runs (metrics) found in them")
    add_output_option(listing)
    listing.set_defaults(handler=cmd_snapshot_list)

    for verb in KUBECTL_DOES:
        # No help=: not listed in --help. Any arguments are taken, so the one line comes first.
        stub = sub.add_parser(verb, add_help=False)
        stub.add_argument("rest", nargs=argparse.REMAINDER)
        stub.set_defaults(handler=_use_kubectl, verb=verb, any_arguments=True)


def _use_kubectl(args: argparse.Namespace) -> int:
    return fail(f"{args.verb}: use {KUBECTL_DOES[args.verb]} (export KUBECONFIG=$(kfcockpit cluster "
                "kubeconfig) points kubectl at the embedded cluster)", exit_now=False)


def _local(args: argparse.Namespace, what: str):
    """The embedded cluster of the state root (what `cluster up|down|kubeconfig` manage)."""
    from backend.local.embedded import Embedded

    settings = settings_from(args)
    if settings.backend != "local":
        fail(f"`{what}` manages the embedded local cluster; on Kubernetes use your cluster's tools "
             "(`kfcockpit cluster status --backend kube` shows what is ready)")
    return Embedded(settings.home)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return int(text)


def _positive_quantity(text: str) -> str:
    from backend.quantity import quantity

    try:
        positive = quantity(text) > 0
    except ValueError:  # its message is apimachinery's regular expression: not for a person
        raise argparse.ArgumentTypeError(f"{text!r} is not a resource quantity: a number and an optional "
                                         "suffix, e.g. 8Gi, 512Mi, 4 or 500m") from None
    if not positive:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return text


async def cmd_up(args: argparse.Namespace) -> int:
    cluster = _local(args, "cluster up")
    changes = _shape_changes(args)
    if changes and cluster.reshape(**changes):
        print("the cluster's new shape applies at the next start: kfcockpit cluster down && kfcockpit cluster up")
    status = await cluster.up()
    print(f"local cluster running: controller pid {status['pid']}, state root {status['home']}")
    if status.get("nodes"):
        simulated = " (nvidia.com/gpu simulated: GPU pods train on CPU)" if status.get("simulated_gpus") else ""
        print(f"nodes: {', '.join(status['nodes'])}{simulated}; node lifecycle: {status.get('timings', '')}")
    print(f"kubectl: export KUBECONFIG={cluster.kubeconfig}")
    return 0


def _shape_changes(args: argparse.Namespace) -> dict:
    """What `cluster up` was asked to change in the cluster's shape (backend/local/shape.py), checked
    there before anything is written or started."""
    from backend.local import shape

    changes = {"nodes": args.nodes, "cpus": args.cpus, "memory": args.memory, "max_pods": args.max_pods,
               "pod_max_pids": args.pod_max_pids,
               "default_unreachable_toleration_seconds": args.default_unreachable_toleration_seconds,
               "default_not_ready_toleration_seconds": args.default_not_ready_toleration_seconds}
    if args.gpus_per_node is not None:
        changes["gpus_per_node"] = shape.gpus(args.gpus_per_node)
    for flag in ("node_monitor_grace_period", "forceful_termination_grace_period"):
        if getattr(args, flag) is not None:
            changes[flag] = shape.duration(getattr(args, flag), "--" + flag.replace("_", "-"))
    return {k: v for k, v in changes.items() if v is not None}


async def cmd_node(args: argparse.Namespace) -> int:
    cluster = _local(args, f"node {args.node_action}")
    act = cluster.fail_node if args.node_action == "fail" else cluster.restore_node
    print(await act(args.node))
    return 0


async def cmd_kubeconfig(args: argparse.Namespace) -> int:
    cluster = _local(args, "cluster kubeconfig")
    await cluster.up()
    print(cluster.kubeconfig)
    return 0


async def cmd_down(args: argparse.Namespace) -> int:
    cluster = _local(args, "cluster down")
    pid = await cluster.down()
    print(f"local cluster stopped (controller pid {pid})" if pid else "local cluster was not running")
    return 0


async def cmd_status(args: argparse.Namespace) -> int:
    cluster = cluster_from(args)
    checks = await cluster.preflight()
    if args.output == "json":
        print_json(checks)
    else:
        print_table(["CHECK", "OK", "DETAIL", "FIX"],
                    [[c.name, "yes" if c.ok else "NO", c.detail, c.fix] for c in checks])
    return 0 if all(c.ok for c in checks) else EXIT_FAILED


async def cmd_logs(args: argparse.Namespace) -> int:
    cluster = cluster_from(args)
    try:
        async for batch in cluster.stream_logs(args.job, follow=args.follow):
            sys.stdout.write("".join(f"{line.pod} {line.text}\n" for line in batch))
            sys.stdout.flush()
    except BrokenPipeError:  # the reader left (`| head`, `| grep -m1`): stop quietly, like kubectl
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


async def cmd_checkpoints(args: argparse.Namespace) -> int:
    from tui.model import format as fmt

    found = await cluster_from(args).checkpoints(args.volume)
    if args.output == "json":
        print_json(found)
        return 0
    print_table(["PATH", "STEP", "WORLD", "LOSS", "SIZE", "VALID"],
                [[c.path, c.step, c.world_size, fmt.loss(c.loss), fmt.size(c.size_bytes),
                  "yes" if c.valid else f"NO: {c.problem}"] for c in found])
    return 0


async def cmd_snapshot_create(args: argparse.Namespace) -> int:
    from tui.model import format as fmt

    snap = await cluster_from(args).snapshot(args.volume, args.name)
    print(f"volumesnapshot/{snap.name} created from {snap.volume}: {count(snap.files, 'file')}, "
          f"{fmt.size(snap.size_bytes)}, {len(snap.metrics)} run(s) with metrics")
    return 0


async def cmd_snapshot_list(args: argparse.Namespace) -> int:
    from tui.model import format as fmt

    snaps = await cluster_from(args).snapshots()
    if args.output == "json":
        print_json(snaps)
        return 0
    now = time.time()

    def runs(s) -> str:
        return ", ".join(f"{m.run or '.'} ({m.final_loss:.4f})" for m in s.metrics) or "-"

    print_table(["NAME", "VOLUME", "READY", "FILES", "SIZE", "AGE", "RUNS (final loss)"],
                [[s.name, s.volume, "yes" if s.ready else "no", s.files, fmt.size(s.size_bytes),
                  fmt.age(now - s.created), runs(s)] for s in snaps])
    return 0
