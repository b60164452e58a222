"""`kfcockpit goodput JOB`: a job's goodput and where the rest of its wall time went, its restart
budget, and whether its group hangs."""

from __future__ import annotations

import argparse

from backend.hangs import DEFAULT_FLOOR, DEFAULT_MULTIPLE
from tui.cli.common import add_command, add_output_option, cluster_from, print_json, print_table
from backend.words import count

DESCRIPTION = """\
The share of a job's wall time that became training progress it kept (goodput), and the rest by
cause, read from its workers' log lines (the definitions of Google's ml-goodput-measurement):

  productive               the steps the job kept (a group's first step up to the mean step)
  program start-up         before the first group formed, and each group's first-step excess
  training prep            a group's start to its first step (rendezvous, model), less restore
  checkpoint restore       loading the checkpoint a group resumed from
  checkpoint save          what saves held the loop; survivors' saves at a teardown
  wasted progress          steps done again after a restart
  infrastructure recovery  from the interrupted step's start to the new group's start
  other                    after the last step (exit); for a running job, the step in flight

It also says how many of the job's restarts are used (JobSet's count against the failure
policy's maxRestarts) and, for a running job, whether its group hangs: ranks that stopped stepping
while their pods run, which no platform reports before the collective timeout (30 min); and any
straggler: a rank whose own compute fell under 0.7x the group's median over a window of steps.

  kfcockpit goodput lesson-ddp            the parts as a table
  kfcockpit goodput lesson-ddp -o json    the same as JSON, with each restart taken apart
  kfcockpit goodput lesson-ddp --hang-multiple 5 --hang-floor 20
  kfcockpit goodput lesson-ddp --attempts each attempt: start, first step, end, why it ended

A running job is measured up to now. Exit codes: 0 shown, 1 the job hangs, 2 bad input."""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "goodput", help="a job's goodput and its badput by cause", description=DESCRIPTION)
    p.add_argument("job", help="a TrainJob or RayJob name")
    p.add_argument("--hang-multiple", type=_positive, default=DEFAULT_MULTIPLE, metavar="N",
                   help="a hang is silence over N recent step times (default %(default)g)")
    p.add_argument("--hang-floor", type=_positive, default=DEFAULT_FLOOR, metavar="SECONDS",
                   help="and over SECONDS at least, for saves between fast steps (default %(default)g)")
    p.add_argument("--attempts", action="store_true",
                   help="instead, one row per attempt: start, first step, end, why it ended (tui/cli/attempts.py)")
    add_output_option(p)
    p.set_defaults(handler=cmd_goodput)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


async def cmd_goodput(args: argparse.Namespace) -> int:
    if args.attempts:
        from tui.cli.attempts import show_attempts

        return await show_attempts(args)
    from backend.goodput import LABELS, STAGE_LABELS
    from backend.goodput.job import measure_job
    from backend.hangs import HangRule

    measured = await measure_job(cluster_from(args), args.job, HangRule(args.hang_multiple, args.hang_floor))
    summary, report, hang = measured.summary, measured.goodput, measured.hang
    if args.output == "json":
        print_json(dict(report.as_dict(), job=summary.name, phase=summary.phase.value,
                        restarts_used=summary.restart_attempt, max_restarts=summary.max_restarts,
                        hang=hang.as_dict() if hang else None, hang_rule=measured.rule.describe(),
                        stragglers=[s.as_dict() for s in measured.stragglers]))
        return 1 if hang else 0
    total = report.total or 1.0
    notes = {
        "productive": f"{count(report.steps_kept, 'step')}, {report.step_seconds * 1000:.1f} ms each",
        "wasted_progress": f"{count(report.steps_lost, 'step')} done again" if report.steps_lost else "",
        "infrastructure_recovery": (f"{count(report.restarts, 'restart')}, {report.recovery_per_restart:.1f} s each"
                                    if report.restarts else ""),
        "checkpoint_save": f"{report.saves} periodic saves" if report.saves else "",
    }
    print(f"{summary.name} ({summary.phase.value}): goodput {report.goodput:.3f} of {report.total:.1f}s wall time")
    print_table(["PART", "SECONDS", "SHARE", ""],
                [[LABELS[name], f"{seconds:.2f}", f"{100 * seconds / total:.1f}%", notes.get(name, "")]
                 for name, seconds in report.parts()])
    for restart in report.restart_times:
        took = f"{restart.seconds:.2f}s" if restart.seconds is not None else "?"
        stages = ", ".join(f"{STAGE_LABELS[name]} {seconds:.2f}s" for name, seconds in restart.stages())
        print(f"restart {restart.attempt}: {took} from the failure to the first step ({stages})")
    if report.attempts_unseen:
        print(f"note: {report.attempts_unseen} earlier attempt(s) restarted and their pods' logs went with them; "
              "their lost work and recovery count as start-up here (the cockpit following the job sees them)")
    print(measured.budget_line())
    for straggler in measured.stragglers:
        print(f"{straggler.one_line()} (steps {straggler.steps[0]}-{straggler.steps[1]})")
    if hang is not None:
        print(f"{hang.one_line()} [{measured.rule.describe()}]")
        return 1
    return 0
