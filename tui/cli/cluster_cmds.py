"""kubectl-like commands on the current platform: `cluster up|down|status`, `apply`, `get`, `logs`,
`delete`, `wait`, `checkpoints`, `snapshot`. They speak only the Cluster protocol, so each works
on the embedded local cluster (default) and on Kubernetes (--backend kube); `cluster up|down`
manage the embedded cluster's controller."""

from __future__ import annotations

import argparse
import os
import sys
import time

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

# kubectl-style names and short names -> the kind the Cluster protocol takes.
KIND_NAMES = {
    "pod": "Pod", "pods": "Pod", "po": "Pod",
    "trainjob": "TrainJob", "trainjobs": "TrainJob", "tj": "TrainJob",
    "persistentvolumeclaim": "PersistentVolumeClaim", "persistentvolumeclaims": "PersistentVolumeClaim",
    "pvc": "PersistentVolumeClaim", "volume": "PersistentVolumeClaim", "volumes": "PersistentVolumeClaim",
    "volumesnapshot": "VolumeSnapshot", "volumesnapshots": "VolumeSnapshot", "snapshot": "VolumeSnapshot",
    "snapshots": "VolumeSnapshot", "vs": "VolumeSnapshot",
    "trainingruntime": "TrainingRuntime", "trainingruntimes": "TrainingRuntime", "runtime": "TrainingRuntime",
    "rayjob": "RayJob", "rayjobs": "RayJob",
}
GET_KINDS = ("trainjobs", "pods", "volumes")

CLUSTER_DESCRIPTION = """\
The embedded local cluster's controller: one detached process per state root that runs the
worker pods and serves the API. Other commands start it on demand; `up` starts it now (and warms
the workers: torch imported once), `down` stops it and every pod, `status` shows what runs."""

WAIT_DESCRIPTION = """\
Wait until a TrainJob reaches a phase (Complete, Failed, Running, Restarting).
Exit codes: 0 reached, 1 the job ended in another phase or the time ran out, 2 bad input."""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "cluster", help="start, stop or inspect the embedded local cluster",
                    description=CLUSTER_DESCRIPTION)
    actions = p.add_subparsers(title="actions", metavar="ACTION", dest="cluster_action", required=True)
    up = add_command(actions, "up", help="start the controller (if needed) and warm the workers")
    up.add_argument("--cpus", type=_positive_quantity, metavar="N",
                    help="the node's allocatable CPUs (default: this machine's); kept for later starts")
    up.add_argument("--memory", type=_positive_quantity, metavar="QTY",
                    help="the node's allocatable memory, e.g. 8Gi (default: this machine's)")
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

    p = add_command(sub, "apply", help="create or update resources from a YAML file (kubectl apply -f)")
    p.add_argument("-f", "--filename", action="append", required=True, metavar="FILE",
                   help="manifest file ('-' for stdin); may be given more than once")
    p.set_defaults(handler=cmd_apply)

    p = add_command(sub, "get", help="list trainjobs, pods or volumes")
    p.add_argument("kind", metavar="KIND", help="trainjobs | pods | volumes")
    p.add_argument("name", nargs="?", help="only this one (pods: of this job)")
    add_output_option(p)
    p.set_defaults(handler=cmd_get)

    p = add_command(sub, "logs", help="every worker's lines of a job, merged (stern style)")
    p.add_argument("job", metavar="JOB")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep following, replacement pods included, until the job finishes")
    p.set_defaults(handler=cmd_logs)

    p = add_command(sub, "delete", help="delete a resource; deleting a pod kills it (the group restarts)")
    p.add_argument("kind", metavar="KIND", help="pod | trainjob | pvc | volumesnapshot | trainingruntime")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=cmd_delete)

    p = add_command(sub, "wait", help="wait for a TrainJob to reach a phase", description=WAIT_DESCRIPTION)
    p.add_argument("kind", metavar="KIND", choices=("trainjob", "trainjobs", "tj", "rayjob", "rayjobs"),
                   help="trainjob (or rayjob)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--for", dest="phase", default="Complete", metavar="PHASE",
                   help="Complete (default), Failed, Running or Restarting; 'condition=Complete' works too")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="default 300")
    p.set_defaults(handler=cmd_wait)

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


def _local(args: argparse.Namespace, what: str):
    """The embedded cluster of the state root (what `cluster up|down|kubeconfig` manage)."""
    from backend.local.embedded import Embedded

    settings = settings_from(args)
    if settings.backend != "local":
        fail(f"`cluster {what}` manages the embedded local cluster; on Kubernetes use your cluster's tools "
             "(`kfcockpit cluster status --backend kube` shows what is ready)")
    return Embedded(settings.home)


def _positive_quantity(text: str) -> str:
    from backend.local.scheduler import quantity

    try:
        if quantity(text) <= 0:
            raise ValueError("must be more than 0")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a resource quantity ({exc})") from None
    return text


async def cmd_up(args: argparse.Namespace) -> int:
    cluster = _local(args, "up")
    if args.cpus or args.memory:
        import json

        from backend.local.scheduler import quantity

        chosen = {"cpu": quantity(args.cpus) if args.cpus else None,
                  "memory": quantity(args.memory) if args.memory else None}
        cluster.layout.root.mkdir(parents=True, exist_ok=True)
        cluster.layout.node_file.write_text(json.dumps(chosen))
        if cluster.client.controller_pid() is not None:
            print("the node's new size applies at the next start: kfcockpit cluster down && kfcockpit cluster up")
    status = await cluster.up()
    print(f"local cluster running: controller pid {status['pid']}, state root {status['home']}")
    print(f"kubectl: export KUBECONFIG={cluster.kubeconfig}")
    return 0


async def cmd_kubeconfig(args: argparse.Namespace) -> int:
    cluster = _local(args, "kubeconfig")
    await cluster.up()
    print(cluster.kubeconfig)
    return 0


async def cmd_down(args: argparse.Namespace) -> int:
    cluster = _local(args, "down")
    pid = await cluster.down()
    print(f"local cluster stopped (controller pid {pid})" if pid else "local cluster was not running")
    return 0


async def cmd_status(args: argparse.Namespace) -> int:
    cluster = cluster_from(args)
    checks = await cluster.preflight()
    if args.output == "json":
        print_json(checks)
    else:
        print_table(["CHECK", "OK", "DETAIL", "FIX"], [[c.name, "yes" if c.ok else "NO", c.detail, c.fix] for c in checks])
    return 0 if all(c.ok for c in checks) else EXIT_FAILED


async def cmd_apply(args: argparse.Namespace) -> int:
    from backend.models import parse_manifests

    resources = []
    for name in args.filename:  # every file parses before anything is applied
        resources += parse_manifests(_read(name), name)
    cluster = cluster_from(args)
    for resource in resources:
        print(await cluster.apply(resource))
    return 0


def _read(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        with open(name) as f:
            return f.read()
    except OSError as exc:
        fail(f"cannot read {name}: {exc.strerror or exc}")


async def cmd_get(args: argparse.Namespace) -> int:
    from tui import format as fmt

    kind = KIND_NAMES.get(args.kind.lower())
    cluster = cluster_from(args)
    now = time.time()
    if kind == "TrainJob":
        jobs = [await cluster.get_job(args.name)] if args.name else await cluster.list_jobs()
        if args.output == "json":
            print_json(jobs)
            return 0
        print_table(["NAME", "STATE", "NODES", "RESTARTS", "AGE", "MESSAGE"],
                    [[j.name, j.phase.value, j.num_nodes, f"{j.restart_attempt}/{j.max_restarts}",
                      fmt.age(now - j.created), j.message] for j in jobs])
    elif kind == "Pod":
        pods = await cluster.list_pods(args.name)
        if args.output == "json":
            print_json(pods)
            return 0
        print_table(["NAME", "RANK", "STATUS", "ATTEMPT", "STEP", "LOSS", "AGE", "REASON"],
                    [[p.name, p.rank, p.phase.value, p.restart_attempt, fmt.step(p.last_step), fmt.loss(p.last_loss),
                      fmt.age(now - p.created), p.reason + (f" ({p.exit_code})" if p.exit_code else "")]
                     for p in pods])
    elif kind == "PersistentVolumeClaim":
        found = [v for v in await cluster.volumes() if not args.name or v.name == args.name]
        if args.output == "json":
            print_json(found)
            return 0
        print_table(["NAME", "CAPACITY", "FILES", "SIZE"], [[v.name, v.capacity, v.files, fmt.size(v.size_bytes)]
                                                            for v in found])
    else:
        return fail(f"cannot get {args.kind!r}: use one of {', '.join(GET_KINDS)}", exit_now=False)
    return 0


async def cmd_logs(args: argparse.Namespace) -> int:
    cluster = cluster_from(args)
    try:
        async for batch in cluster.stream_logs(args.job, follow=args.follow):
            sys.stdout.write("".join(f"{line.pod} {line.text}\n" for line in batch))
            sys.stdout.flush()
    except BrokenPipeError:  # the reader left (`| head`, `| grep -m1`): stop quietly, like kubectl
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


async def cmd_delete(args: argparse.Namespace) -> int:
    kind = KIND_NAMES.get(args.kind.lower())
    if kind is None:
        return fail(f"cannot delete {args.kind!r}: use pod, trainjob, rayjob, pvc, volumesnapshot or trainingruntime",
                    exit_now=False)
    await cluster_from(args).delete(kind, args.name)
    print(f"{kind.lower()}/{args.name} deleted")
    return 0


async def cmd_wait(args: argparse.Namespace) -> int:
    from backend.cluster import Timeout
    from backend.models import JobPhase

    wanted = args.phase.split("=", 1)[-1].strip().capitalize()
    try:
        phase = JobPhase(wanted)
    except ValueError:
        return fail(f"--for {args.phase!r}: use one of {', '.join(p.value for p in JobPhase)}", exit_now=False)
    cluster = cluster_from(args)
    try:
        job = await cluster.wait_job(args.name, frozenset({phase}), args.timeout)
    except Timeout as exc:
        return fail(str(exc), exit_code=EXIT_FAILED, exit_now=False)
    if job.phase != phase:
        return fail(f"trainjob {job.name} is {job.phase.value}, not {phase.value}: {job.message}",
                    exit_code=EXIT_FAILED, exit_now=False)
    print(f"trainjob/{job.name} condition met: {phase.value}")
    return 0


async def cmd_checkpoints(args: argparse.Namespace) -> int:
    from tui import format as fmt

    found = await cluster_from(args).checkpoints(args.volume)
    if args.output == "json":
        print_json(found)
        return 0
    print_table(["PATH", "STEP", "WORLD", "LOSS", "SIZE", "VALID"],
                [[c.path, c.step, c.world_size, fmt.loss(c.loss), fmt.size(c.size_bytes),
                  "yes" if c.valid else f"NO: {c.problem}"] for c in found])
    return 0


async def cmd_snapshot_create(args: argparse.Namespace) -> int:
    from tui import format as fmt

    snap = await cluster_from(args).snapshot(args.volume, args.name)
    print(f"volumesnapshot/{snap.name} created from {snap.volume}: {snap.files} files, "
          f"{fmt.size(snap.size_bytes)}, {len(snap.metrics)} run(s) with metrics")
    return 0


async def cmd_snapshot_list(args: argparse.Namespace) -> int:
    from tui import format as fmt

    snaps = await cluster_from(args).snapshots()
    if args.output == "json":
        print_json(snaps)
        return 0
    now = time.time()
    print_table(["NAME", "VOLUME", "READY", "FILES", "SIZE", "AGE", "RUNS (final loss)"],
                [[s.name, s.volume, "yes" if s.ready else "no", s.files, fmt.size(s.size_bytes), fmt.age(now - s.created),
                  ", ".join(f"{m.run or '.'} ({m.final_loss:.4f})" for m in s.metrics) or "-"] for s in snaps])
    return 0
