"""`kfcockpit compare`: the same loop as a Trainer job and under Ray Train, measured side by side."""

from __future__ import annotations

import argparse
import sys
import textwrap

from tui.cli.common import EXIT_USAGE, add_command, add_output_option, fail, print_json, print_table

DESCRIPTION = """\
Lesson step 10, from measured runs instead of opinions. Runs the training loop twice on the
embedded cluster with the same plan: as a TrainJob (the Trainer's way) and as a RayJob (Ray
Train's TorchTrainer on a private Ray), both through the same cluster API. Each run has one
worker pod killed mid-run; the table shows launch model, time to first step, recovery time,
steps lost, final loss, wall time and who owns the job definition. The result is saved in the
workspace, and the lesson pre-fills step 10's note from it. The jobs stay on the cluster for a
look (kubectl get trainjobs,rayjobs; kfcockpit logs cmp-...-ray) until the next comparison.

  kfcockpit compare                 measure both (a minute or two), save, print the table
  kfcockpit compare --last          the last saved comparison, without running anything
  kfcockpit compare -o json         the same as JSON
  kfcockpit compare --note          the Markdown text step 10's note is pre-filled with

Exit codes: 0 measured (or shown), 1 a run did not show a kill and a resume, 2 bad input."""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "compare", help="measure the Trainer and Ray Train on the same loop (step 10)",
                    description=DESCRIPTION)
    p.add_argument("--last", action="store_true", help="show the last saved comparison; run nothing")
    p.add_argument("--note", action="store_true", help="print the note text instead of the table")
    p.add_argument("--workers", type=int, default=2, help="workers on each side (default 2)")
    p.add_argument("--steps", type=int, default=40, help="steps of each run (default 40)")
    p.add_argument("--ckpt-every", type=int, default=5, help="checkpoint every N steps (default 5)")
    p.add_argument("--kill-at", type=int, default=12, metavar="STEP",
                   help="SIGKILL a worker when this step shows (default 12)")
    p.add_argument("--kill-rank", type=int, default=1, help="the rank killed (default 1)")
    p.add_argument("--step-delay", type=float, default=0.1,
                   help="seconds paused after each step (default 0.1)")
    add_output_option(p)
    p.set_defaults(handler=cmd_compare)


async def cmd_compare(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from backend.compare import ComparisonPlan, latest_comparison, run_comparison
    from backend.compare.observer import ObservationError
    from tui.cli.common import settings_from

    settings = settings_from(args)
    if args.last:
        comparison = latest_comparison(settings)
        if comparison is None:
            return fail("no comparison measured yet: run `kfcockpit compare`", exit_now=False)
    else:
        try:
            plan = ComparisonPlan(workers=args.workers, steps=args.steps, ckpt_every=args.ckpt_every,
                                  kill_at_step=args.kill_at, kill_rank=args.kill_rank,
                                  step_delay=args.step_delay)
        except ValidationError as exc:
            first = exc.errors()[0]
            option = "--" + str(first["loc"][0]).replace("_", "-").replace("kill-at-step", "kill-at")
            return fail(f"{option}: {first['msg'].lower()}", exit_code=EXIT_USAGE, exit_now=False)

        def progress(text: str) -> None:
            print(text, file=sys.stderr, flush=True)

        try:
            comparison = await run_comparison(settings, plan, progress=progress)
        except ObservationError as exc:
            return fail(str(exc), exit_code=1, exit_now=False)
    if args.output == "json":
        print_json(comparison)
    elif args.note:
        sys.stdout.write(comparison.as_note())
    else:
        rows = comparison.rows()
        print_table(rows[0], rows[1:])
        print()
        for line in comparison.details():
            print(textwrap.fill(line, 79, subsequent_indent="  "))
    return 0
