"""`kfcockpit goodput JOB --attempts`: the attempt ledger (backend/ledger), one row per attempt of
the job's group: when it started, its first step, when it ended and why, and the restarts used of
the JobSet's budget. Apart from goodput's own output, which another part of the command owns."""

from __future__ import annotations

import argparse
import time

from tui.cli.common import cluster_from, print_json, print_table
from tui.model.format import since as _clock


async def show_attempts(args: argparse.Namespace) -> int:
    from backend.ledger.read import read_ledger

    ledger = await read_ledger(cluster_from(args), args.job)
    if args.output == "json":
        print_json(dict(job=ledger.job, restarts_used=ledger.restarts_used, restarts_counted=ledger.restarts_counted,
                        max_restarts=ledger.max_restarts, restarts_left=ledger.restarts_left,
                        attempts=[r.as_dict() for r in ledger.rows], notes=list(ledger.notes)))
        return 0
    origin = ledger.rows[0].start if ledger.rows else None
    began = time.strftime("%H:%M:%S", time.localtime(origin)) if origin else "?"
    print(f"{ledger.job}: {len(ledger.rows)} attempt(s), times from the first one's start ({began})")
    print_table(["ATTEMPT", "START", "FIRST STEP", "END", "WHY IT ENDED"],
                [[row.attempt, _clock(row.start, origin),
                  "-" if row.first_step is None else f"{row.first_step} at {_clock(row.first_step_at, origin)}",
                  _clock(row.end, origin), row.why] for row in ledger.rows])
    for note in ledger.notes:
        print(f"note: {note}")
    uncounted = ledger.restarts_used - ledger.restarts_counted
    print(f"restarts: {ledger.restarts_counted} of {ledger.max_restarts} used (the JobSet's count against its "
          f"failure policy's maxRestarts), {ledger.restarts_left} left"
          + (f"; {uncounted} more not counted (RestartJobSetAndIgnoreMaxRestarts)" if uncounted > 0 else ""))
    return 0
