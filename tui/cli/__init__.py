"""`kfcockpit`: with no command, the cockpit; with one, the same operations headless.

Each command group lives in its own module with a `register(subparsers)` function; modules import
the backend inside their handlers, so `kfcockpit --help` and the UI start without heavy imports.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import inspect
import sys
from typing import Callable

from tui.cli.common import EXIT_USAGE, fail, global_options
from tui.cli.app_cmds import cockpit_options

# Order is the order of `kfcockpit --help`.
COMMAND_MODULES = (
    "tui.cli.app_cmds",
    "tui.cli.cluster_cmds",
    "tui.cli.lesson_cmds",
    "tui.cli.pipeline_cmds",
    "tui.cli.compare_cmds",
    "tui.cli.goodput_cmds",
    "tui.cli.explain_cmds",
    "tui.cli.record_cmds",
    "tui.cli.pod_cmds",
    "tui.cli.k9s_cmds",
)

DESCRIPTION = """\
A terminal cockpit that teaches and runs distributed PyTorch training the Kubeflow way.

With no command it opens the cockpit on the embedded local cluster (worker pods are processes on
this machine); --backend kube --context NAME opens it on a Kubernetes cluster with Kubeflow
Trainer and Pipelines. The commands below do what kubectl does not: merged logs that follow
replacement pods, checkpoints on a volume, snapshots, the lesson, pipelines, comparisons.
kubectl does the rest (apply, get, delete, wait) on any cluster, the embedded one included:

  export KUBECONFIG=$(kfcockpit cluster kubeconfig)
  kubectl apply -f manifests/volume.yaml -f manifests/trainjob.yaml"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        fail(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kfcockpit", description=DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    global_options(parser)
    cockpit_options(parser)  # --no-mouse, --theme: the cockpit's own (tui/cli/app_cmds.py)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _command_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the command `argv` names (`lesson run` in `lesson run --bogus`): its error
    names the command and points at that command's own help."""
    for token in argv:
        commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if commands is None:
            break
        if token in commands.choices:
            parser = commands.choices[token]
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "any_arguments", False):
        command = _command_parser(parser, sys.argv[1:] if argv is None else argv)
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    return dispatch(args)


def dispatch(args: argparse.Namespace) -> int:
    """Run a command's handler (the cockpit's without one): a user's error is one line, exit 2."""
    from backend.errors import USER_ERRORS

    handler = getattr(args, "handler", None)
    if handler is None:
        from tui.cli.app_cmds import open_cockpit

        handler = open_cockpit
    try:
        result = handler(args)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except USER_ERRORS as exc:
        return fail(str(exc), exit_code=EXIT_USAGE, exit_now=False)
    except KeyboardInterrupt:
        return 130


def run(main: Callable[[], int] = main) -> None:
    code = main()
    # Done: what is alive now is only freed by the interpreter's teardown, whose collections would
    # walk every object of the modules a command loaded (kubernetes, kfp, pydantic: up to a second
    # on a busy machine). Frozen, they are skipped; atexit and the stream flushes still run.
    gc.freeze()
    sys.exit(code)
