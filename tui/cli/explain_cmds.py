"""`kfcockpit explain JOB`: the anatomy of a TrainJob (backend/anatomy), printed as plain text:
the chain of objects it became, what each runtime patch changed, and one pod's pieces with who
put each there."""

from __future__ import annotations

import argparse

from tui.cli.common import add_command, add_output_option, cluster_from, print_json, print_table, settings_from

DESCRIPTION = """\
What the platform did for a TrainJob, read from its objects: the chain TrainJob → runtime (with
a diff of what each runtimePatches manager changed) → JobSet (replicated jobs, failure and success
policy, restarts against the budget) → Jobs → pods; then one pod (rank 1's by default) piece by
piece, each with who put it there: the PET_* variables and master address (the Trainer's torch
plugin), the DNS names and headless Service (JobSet), the volume and mounts (the patch's
manager), the node (the scheduler), devices (the device plugin), labels and annotations (each
controller). What the framework does (process group, all-reduce, checkpoints) is listed apart.

  kfcockpit explain lesson-ddp              the anatomy, rank 1's pod taken apart
  kfcockpit explain lesson-ddp --rank 0     rank 0's pod (the master) instead
  kfcockpit explain lesson-ddp -o json      the same as JSON, each piece with its upstream code

It reads objects only: the same on the embedded cluster and a real one. Exit codes: 0 shown, 2
bad input (no such TrainJob)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "explain", help="what the platform put in a TrainJob's pods, and who", description=DESCRIPTION)
    p.add_argument("job", help="a TrainJob name")
    p.add_argument("--rank", type=int, default=1, help="the rank whose pod is taken apart (default %(default)s)")
    add_output_option(p)
    p.set_defaults(handler=cmd_explain)


async def cmd_explain(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    cluster = cluster_from(args)
    try:
        anatomy = await cluster.explain(args.job, args.rank)
    finally:
        await cluster.close()
    from backend.lesson.engine import Lesson

    Lesson(None, settings_from(args)).saw_anatomy(anatomy)  # step 2's verify cites what was looked at
    if args.output == "json":
        print_json(asdict(anatomy))
        return 0
    for section in anatomy.sections:
        print(f"== {section.title}")
        print_table(["", "", ""], [[row.name, row.value, row.note] for row in section.rows], header=False)
    for patch in anatomy.patches:
        print(f"== runtimePatches manager {patch.manager}: {len(patch.changes)} field(s)")
        for change in patch.changes:
            print(change.path)
            if change.before is not None:
                print(f"- {change.before}")
            if change.after is not None:
                print(f"+ {change.after}")
    for note in anatomy.notes:
        print(f"note: {note}")
    if anatomy.pod is not None:
        print(f"== pod {anatomy.pod} (rank {anatomy.rank}): who put each piece there")
        print_table(["KIND", "NAME", "VALUE", "BY"],
                    [[p.kind, p.name, p.value, p.source.by] for p in anatomy.pieces])
    from backend.anatomy.provenance import FRAMEWORK_PARTS

    print("== the framework's, not the platform's")
    print_table(["", ""], FRAMEWORK_PARTS, header=False)
    return 0
