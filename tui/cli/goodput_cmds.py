"""`kfcockpit goodput JOB`: a job's goodput and where the rest of its wall time went."""

from __future__ import annotations

import argparse

from tui.cli.common import add_command, add_output_option, cluster_from, print_json, print_table

DESCRIPTION = """\
The share of a job's wall time that became training progress it kept (goodput), and the rest by
cause, read from its workers' log lines (the definitions of Google's ml-goodput-measurement):

  productive        time of the steps the job kept
  lost work         steps done again after a restart, and the step a failure cut off
  recovery          from a failure to the restarted group's first step (teardown, scheduling,
                    start, rendezvous, checkpoint load)
  checkpoint stall  what the training loop waited on checkpoint saves
  start-up          from the job's creation to its first step
  other             after the last step (exit); for a running job, the step in flight

  kfcockpit goodput lesson-ddp            the parts as a table
  kfcockpit goodput lesson-ddp -o json    the same as JSON

A running job is measured up to now. Exit codes: 0 shown, 2 bad input (no such job)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "goodput", help="a job's goodput and its badput by cause", description=DESCRIPTION)
    p.add_argument("job", help="a TrainJob or RayJob name")
    add_output_option(p)
    p.set_defaults(handler=cmd_goodput)


async def cmd_goodput(args: argparse.Namespace) -> int:
    from backend.goodput import LABELS, job_goodput

    summary, report = await job_goodput(cluster_from(args), args.job)
    if args.output == "json":
        print_json(dict(report.as_dict(), job=summary.name, phase=summary.phase.value))
        return 0
    total = report.total or 1.0
    notes = {
        "productive": f"{report.steps_kept} steps, {report.step_seconds * 1000:.1f} ms each",
        "lost_work": f"{report.steps_lost} steps done again" if report.steps_lost else "",
        "recovery": f"{report.restarts} restarts" if report.restarts else "",
        "checkpoint_stall": (f"{report.saves} saves, {report.stall_per_save * 1000:.1f} ms each"
                             if report.saves else ""),
    }
    print(f"{summary.name} ({summary.phase.value}): goodput {report.goodput:.3f} of {report.total:.1f}s wall time")
    print_table(["PART", "SECONDS", "SHARE", ""],
                [[LABELS[name], f"{seconds:.2f}", f"{100 * seconds / total:.1f}%", notes.get(name, "")]
                 for name, seconds in report.parts()])
    if report.attempts_unseen:
        print(f"note: {report.attempts_unseen} earlier attempt(s) restarted and their pods' logs went with them; "
              "their lost work and recovery count as start-up here (the cockpit following the job sees them)")
    return 0
