"""`kubectl cockpit JOB`: kubectl runs the `kubectl-cockpit` program it finds on PATH (this
package's console script) with the words after `cockpit`, as it runs every plugin. It is
`kfcockpit --follow JOB`, with the same platform and cockpit options."""

from __future__ import annotations

import argparse

from tui.cli import _Parser, dispatch, run
from tui.cli.app_cmds import cockpit_options
from tui.cli.common import global_options

DESCRIPTION = """\
Open kfcockpit following JOB (a TrainJob or a RayJob), as `kfcockpit --follow JOB` does.

  kubectl cockpit lesson-ddp
  kubectl cockpit my-job -n team-a --context kind-kfcockpit"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kubectl cockpit", description=DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("follow", metavar="JOB", help="the TrainJob or RayJob to follow")
    global_options(parser)
    cockpit_options(parser, follow=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    return dispatch(build_parser().parse_args(argv))


def kubectl_cockpit() -> None:
    run(main)
