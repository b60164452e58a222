"""What every command shares: global options, settings from them, one-line errors, output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterable, Sequence

EXIT_FAILED = 1  # the operation ran and did not succeed (a job failed, a verify did not pass)
EXIT_USAGE = 2  # bad input, unknown names, an unreachable platform: nothing was done


def fail(message: str, exit_code: int = EXIT_USAGE, exit_now: bool = True) -> int:
    sys.stderr.write(f"kfcockpit: {message}\n")
    if exit_now:
        sys.exit(exit_code)
    return exit_code


def global_options(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    """--backend/--context/--namespace/--home; on subcommands too (suppress keeps the root's values)."""
    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
    g = parser.add_argument_group("platform")
    g.add_argument("--backend", choices=("local", "kube"), default=d("local"),
                   help="embedded local cluster (default) or Kubernetes")
    g.add_argument("--context", default=d(None), help="kube context (implies --backend kube)")
    g.add_argument("--namespace", "-n", default=d(None),
                   help="kube namespace (default: the context's namespace, else default)")
    g.add_argument("--kubeconfig", default=d(None), help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    g.add_argument("--home", default=d(None), help="state root (default: $KFCOCKPIT_HOME or the XDG state dir)")


def add_command(sub: argparse._SubParsersAction, name: str, help: str, description: str | None = None,
                **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand that also accepts the global options after its name (kubectl style)."""
    parser = sub.add_parser(name, help=help, description=description or help,
                            formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
    global_options(parser, suppress=True)
    return parser


def settings_from(args: argparse.Namespace):
    from backend.settings import Settings

    values: dict[str, Any] = {"backend": args.backend, "namespace": args.namespace}  # None: the context's
    if args.context:
        values.update(backend="kube", context=args.context)
    if args.kubeconfig:
        values["kubeconfig"] = args.kubeconfig
    if args.home:
        values["home"] = args.home
    if getattr(args, "kfp_host", None):
        values["kfp_host"] = args.kfp_host
    return Settings(**values)


def cluster_from(args: argparse.Namespace):
    from backend.connect import connect

    return connect(settings_from(args))


def print_json(value: Any) -> None:
    def plain(v: Any) -> Any:
        if hasattr(v, "model_dump"):
            return v.model_dump(mode="json", by_alias=True)
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    json.dump(plain(value), sys.stdout, indent=2)
    sys.stdout.write("\n")


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], header: bool = True) -> None:
    """Plain aligned columns, like kubectl: greppable, no colour, no box drawing."""
    table = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    for r in table if header else table[1:]:
        sys.stdout.write("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def add_output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="output format (default: table)")
